"""Hypothesis strategies for the Kafka messages, derived from their descriptions."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from strom_gateway.kafka.protocol.schema import Field, Struct

_INTS = {
    "int8": st.integers(-(2**7), 2**7 - 1),
    "int16": st.integers(-(2**15), 2**15 - 1),
    "uint16": st.integers(0, 2**16 - 1),
    "int32": st.integers(-(2**31), 2**31 - 1),
    "int64": st.integers(-(2**63), 2**63 - 1),
}


def _primitive(kind: str) -> st.SearchStrategy[Any]:
    if kind in _INTS:
        return _INTS[kind]
    if kind == "float64":
        return st.floats(allow_nan=False)
    if kind == "bool":
        return st.booleans()
    if kind == "string":
        return st.text(max_size=12)
    if kind == "uuid":
        return st.binary(min_size=16, max_size=16)
    return st.binary(max_size=40)  # bytes, records


def _field(
    f: Field, version: int, flexible: bool, *, allow_null: bool = True
) -> st.SearchStrategy[Any]:
    item = message(f.type, version, flexible) if isinstance(f.type, Struct) else _primitive(f.type)
    value = st.lists(item, max_size=3) if f.array else item
    if allow_null and (version in f.nullable or (f.type == "records" and not f.array)):
        value = st.none() | value
    return value


def message(s: Struct, version: int, flexible: bool) -> st.SearchStrategy[dict[str, Any]]:
    """Values of ``s`` at ``version``: every field the version carries."""
    plain, tagged = s.plan(version, flexible)
    return st.fixed_dictionaries(
        {f.name: _field(f, version, flexible) for f in plain},
        # A tagged field left out and one set to null are the same on the wire: leave out.
        optional={f.name: _field(f, version, flexible, allow_null=False) for f in tagged},
    )


def plain(value: Any) -> Any:
    """``value`` with memoryviews as bytes (decoded records are views of the frame)."""
    if isinstance(value, memoryview):
        return bytes(value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value

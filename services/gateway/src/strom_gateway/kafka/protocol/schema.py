"""The vocabulary the Kafka message descriptions (``messages``) are written in.

A message is a ``Struct``: an ordered list of ``Field``s, each present in a range of versions
(Kafka's "3+", "0-7"), possibly nullable in a range of versions, possibly a tagged field (only
in flexible versions, identified by its tag number). A field's type is a primitive name
(``PRIMITIVES``), a nested ``Struct``, or an array of either. ``Api`` ties a request and a
response struct to an API key, the versions Strom serves and the first flexible version (from
which strings, bytes and arrays are compact and every struct carries tagged fields).

Values are plain dicts keyed by field name; ``Struct.plan(version)`` lists the fields a version
carries, computed once per version.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "NEVER",
    "PRIMITIVES",
    "Api",
    "Field",
    "Struct",
    "Versions",
    "arr",
    "f",
    "struct",
    "versions",
]

#: The primitive types of Kafka's protocol guide.
PRIMITIVES = frozenset(
    {"int8", "int16", "int32", "int64", "uint16", "float64", "bool", "string", "bytes",
     "records", "uuid"}
)  # fmt: skip

#: The value a field takes when a version does not carry it, or a caller leaves it out.
_ZERO: dict[str, Any] = {
    "int8": 0, "int16": 0, "int32": 0, "int64": 0, "uint16": 0, "float64": 0.0,
    "bool": False, "string": "", "bytes": b"", "records": None, "uuid": bytes(16),
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Versions:
    """An inclusive range of versions; ``high`` None is open-ended ("3+")."""

    low: int
    high: int | None = None

    def __contains__(self, version: object) -> bool:
        return (
            isinstance(version, int)
            and version >= self.low
            and (self.high is None or version <= self.high)
        )


NEVER = Versions(1, 0)


def versions(text: str | None) -> Versions:
    """``"3+"``, ``"0-7"``, ``"5"`` or None (never) as a ``Versions``."""
    if text is None:
        return NEVER
    if text.endswith("+"):
        return Versions(int(text[:-1]))
    low, _, high = text.partition("-")
    return Versions(int(low), int(high or low))


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a struct (see the module docstring)."""

    name: str
    type: str | Struct
    versions: Versions
    array: bool = False
    nullable: Versions = NEVER
    tag: int | None = None
    default: Any = None

    def zero(self) -> Any:
        """The value of this field when absent."""
        if self.default is not None:
            return self.default
        if self.array:
            return []
        if isinstance(self.type, Struct):
            return self.type.defaults()
        return _ZERO[self.type]


@dataclass(eq=False)
class Struct:
    """An ordered list of fields; ``plan`` caches the fields of each version."""

    name: str
    fields: tuple[Field, ...]
    _plans: dict[int, tuple[tuple[Field, ...], tuple[Field, ...]]] = field(
        default_factory=dict, repr=False
    )

    def plan(self, version: int, flexible: bool) -> tuple[tuple[Field, ...], tuple[Field, ...]]:
        """(the untagged fields, the tagged fields sorted by tag) that ``version`` carries."""
        found = self._plans.get(version)
        if found is None:
            present = [f for f in self.fields if version in f.versions]
            plain = tuple(f for f in present if f.tag is None)
            tagged = tuple(
                sorted((f for f in present if f.tag is not None and flexible),
                       key=lambda f: f.tag or 0)
            )  # fmt: skip
            found = self._plans[version] = (plain, tagged)
        return found

    def defaults(self) -> dict[str, Any]:
        """Every field at its zero value."""
        return {f.name: f.zero() for f in self.fields}


@dataclass(frozen=True)
class Api:
    """One Kafka API: key, name, the versions served and the message structs."""

    key: int
    name: str
    min_version: int
    max_version: int
    first_flexible: int | None
    request: Struct
    response: Struct

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    def flexible(self, version: int) -> bool:
        return self.first_flexible is not None and version >= self.first_flexible


# -- the shorthand the descriptions use --------------------------------------------------------


def f(
    name: str,
    type: str,
    v: str = "0+",
    *,
    null: str | None = None,
    tag: int | None = None,
    default: Any = None,
) -> Field:
    """A primitive field present in versions ``v``, nullable in ``null``."""
    if type not in PRIMITIVES:
        raise ValueError(f"{name}: unknown type {type!r}")
    return Field(name, type, versions(v), False, versions(null), tag, default)


def arr(
    name: str,
    of: str | list[Field],
    v: str = "0+",
    *,
    null: str | None = None,
    tag: int | None = None,
) -> Field:
    """An array of a primitive type or of structs (given as their fields)."""
    if isinstance(of, str):
        if of not in PRIMITIVES:
            raise ValueError(f"{name}: unknown type {of!r}")
        return Field(name, of, versions(v), True, versions(null), tag)
    return Field(name, Struct(name, tuple(of)), versions(v), True, versions(null), tag)


def struct(name: str, fields: list[Field], v: str = "0+", *, tag: int | None = None) -> Field:
    """A nested struct (not an array)."""
    return Field(name, Struct(name, tuple(fields)), versions(v), False, NEVER, tag)

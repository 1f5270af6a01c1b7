"""The per-record kernels, bound once at import: the C twin if it loaded, else pure Python.

``STROM_NO_EXTENSIONS=1`` in the environment forces pure Python (see ``_native``).
``PYTHON`` is always available; ``C`` is None without the extension; ``ACTIVE`` is the one the
codec uses unless a call is given another (``kernel=``). Public: tests, benchmarks and the
Spark connector pick a kernel explicitly (``available()``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from strom.records import record, varint
from strom.records._native import crecords
from strom.records._protocols import (
    DecodeColumns,
    DecodeRecords,
    RecordsWriterProtocol,
    VarintDecoder,
)

__all__ = ["ACTIVE", "PYTHON", "C", "Kernel", "available"]


@dataclass(frozen=True, slots=True)
class Kernel:
    """One implementation of the per-record codec."""

    name: Literal["c", "python"]
    writer: Callable[[], RecordsWriterProtocol]
    decode_records: DecodeRecords
    decode_columns: DecodeColumns
    encode_varint: Callable[[int], bytes]
    encode_varlong: Callable[[int], bytes]
    decode_varint: VarintDecoder
    decode_varlong: VarintDecoder

    def __repr__(self) -> str:
        return f"<records kernel {self.name!r}>"


PYTHON = Kernel(
    name="python",
    writer=record.RecordsWriter,
    decode_records=record.decode_records,
    decode_columns=record.decode_columns,
    encode_varint=varint.encode_varint,
    encode_varlong=varint.encode_varlong,
    decode_varint=varint.decode_varint,
    decode_varlong=varint.decode_varlong,
)

C: Kernel | None = None
if crecords is not None:
    C = Kernel(
        name="c",
        writer=crecords.RecordsWriter,
        decode_records=crecords.decode_records,
        decode_columns=crecords.decode_columns,
        encode_varint=crecords.encode_varint,
        encode_varlong=crecords.encode_varlong,
        decode_varint=crecords.decode_varint,
        decode_varlong=crecords.decode_varlong,
    )

#: The kernel the public functions use unless given another.
ACTIVE: Kernel = C if C is not None else PYTHON


def available() -> list[Kernel]:
    """Every kernel this process can use (pure Python first)."""
    return [PYTHON] if C is None else [PYTHON, C]

"""Kafka's v2 record-batch format: the one codec of Strom (producer, consumer, storage).

Write a batch with ``BatchBuilder`` (or ``encode_batch``), read it with ``decode_batch``,
``decode_batches``, ``iter_records`` or ``decode_columns``. A storage node only needs the
header helpers (``validate_batch``, ``patch_base_offset``, ...): it never decodes records.
``decode_control_record`` names the transaction markers a control batch carries.

The per-record loops run in C when the optional extension is built (``IMPLEMENTATION ==
"c"``), else in pure Python (``"python"``); ``STROM_NO_EXTENSIONS=1`` forces Python. Both
produce identical bytes and identical errors; ``strom.records.kernel`` holds both (benchmarks and
tests pick one with ``kernel=``). Layout: ``docs/record-batch-format.md``.
"""

from __future__ import annotations

from typing import Literal

from strom.records.batch import (
    BatchBuilder,
    BatchColumns,
    DecodedBatch,
    TimestampType,
    decode_batch,
    decode_batches,
    decode_columns,
    encode_batch,
    iter_records,
    rebuild_batch,
    recompress_batch,
)
from strom.records.compression import DEFAULT_MAX_DECOMPRESSED_SIZE, Compression
from strom.records.control import ControlRecord, ControlRecordType, decode_control_record
from strom.records.header import (
    HEADER_SIZE,
    MAX_BATCH_SIZE,
    BatchHeader,
    patch_base_offset,
    patch_leader_epoch,
    read_header,
    set_log_append_time,
    validate_batch,
    walk_batches,
)
from strom.records.kernel import ACTIVE as _ACTIVE
from strom.records.record import Record

__all__ = [
    "DEFAULT_MAX_DECOMPRESSED_SIZE",
    "HEADER_SIZE",
    "IMPLEMENTATION",
    "MAX_BATCH_SIZE",
    "BatchBuilder",
    "BatchColumns",
    "BatchHeader",
    "Compression",
    "ControlRecord",
    "ControlRecordType",
    "DecodedBatch",
    "Record",
    "TimestampType",
    "decode_batch",
    "decode_batches",
    "decode_columns",
    "decode_control_record",
    "encode_batch",
    "iter_records",
    "patch_base_offset",
    "patch_leader_epoch",
    "read_header",
    "rebuild_batch",
    "recompress_batch",
    "set_log_append_time",
    "validate_batch",
    "walk_batches",
]

#: Which per-record implementation is bound: "c" (the extension) or "python".
IMPLEMENTATION: Literal["c", "python"] = _ACTIVE.name

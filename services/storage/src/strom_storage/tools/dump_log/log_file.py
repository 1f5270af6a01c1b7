"""Reading a segment's ``.log`` file batch by batch, reporting where and how it breaks.

Every batch is checked as recovery checks it: header (``strom.records.read_header``), CRC-32C
(``validate_batch``), offsets increasing and within 2^31 - 1 of the segment's base offset. A
batch whose CRC does not match is shown with ``isvalid: false`` and reading goes on (its length
is sound); a header that cannot be trusted (torn tail, bad magic, length out of range) ends the
walk there, since nothing after it can be located.

The walk stops at the size the file had when it began; a batch being appended at that moment
is read again until it is whole (a torn tail is a batch cut short in a file that does not
grow).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from strom.errors import CorruptRecordError, InvalidCrcError, UnsupportedCompressionTypeError
from strom.records import HEADER_SIZE, MAX_BATCH_SIZE, BatchHeader, decode_batch, read_header
from strom.records.control import decode_control_record
from strom.records.header import HEADER, validate_batch
from strom_storage.tools.dump_log.reading import ReadOnlyFile
from strom_storage.tools.dump_log.report import BatchItem, Problem, RecordItem

__all__ = ["LogRead", "read_batches", "record_items"]

#: Largest offset distance from a segment's base offset (relative offsets are int32).
_MAX_RELATIVE = 0x7FFFFFFF
_SEQUENCE_WRAP = 1 << 31


@dataclass(frozen=True, slots=True)
class LogRead:
    """A batch read from the file: its item and its bytes (for decoding the records)."""

    item: BatchItem
    data: bytes


def _batch_bytes(file: ReadOnlyFile, position: int) -> tuple[bytes, int]:
    """The bytes of the batch at ``position`` as far as the file holds them (just its header
    when the length field is out of range: ``read_header`` then says so), and how many bytes
    were asked for."""
    head = file.pread(HEADER_SIZE, position)
    if len(head) < HEADER_SIZE:
        return head, HEADER_SIZE
    size = BatchHeader._make(HEADER.unpack_from(head)).size
    if not HEADER_SIZE <= size <= MAX_BATCH_SIZE:
        return head, HEADER_SIZE
    return head + file.pread(size - HEADER_SIZE, position + HEADER_SIZE), size


def _settled_batch_bytes(file: ReadOnlyFile, position: int) -> bytes:
    """``_batch_bytes``, read again while the batch is cut short but the file has grown past
    what was read: a batch being appended right now is not a torn tail."""
    data, wanted = _batch_bytes(file, position)
    while len(data) < wanted and file.size() > position + len(data):
        data, wanted = _batch_bytes(file, position)
    return data


def _order_problem(
    position: int, header: BatchHeader, base_offset: int | None, next_offset: int | None
) -> Problem | None:
    """The offset invariant of a segment this batch breaks, if any."""
    where = f"batch at byte {position} (base offset {header.base_offset})"
    if next_offset is not None and header.base_offset < next_offset:
        message = f"{where}: offsets go backwards, the previous batch ended at {next_offset - 1}"
    elif base_offset is not None and header.base_offset < base_offset:
        message = f"{where}: below the segment's base offset {base_offset}"
    elif base_offset is not None and header.last_offset - base_offset > _MAX_RELATIVE:
        message = f"{where}: last offset {header.last_offset} is too far above {base_offset}"
    else:
        return None
    return Problem(message, position=position)


def read_batches(file: ReadOnlyFile, base_offset: int | None) -> Iterator[LogRead | Problem]:
    """Every batch of a ``.log`` file in order, with a ``Problem`` after each one that is bad
    and a final ``Problem`` where the walk had to stop (see the module docstring)."""
    position, end = 0, file.size()
    next_offset: int | None = None
    while position < end:
        data = _settled_batch_bytes(file, position)
        crc_problem = None
        try:
            header = validate_batch(data, origin=position)
        except InvalidCrcError as exc:
            header = read_header(data, origin=position)
            crc_problem = Problem(str(exc), position=position)
        except CorruptRecordError as exc:
            left = max(file.size(), end) - position
            yield Problem(f"{exc}; the last {left} bytes are not read", position=position)
            return
        yield LogRead(BatchItem(position, header, crc_problem is None), data)
        if crc_problem is not None:
            yield crc_problem
        order = _order_problem(position, header, base_offset, next_offset)
        if order is not None:
            yield order
        next_offset = header.next_offset
        position += header.size


def record_items(read: LogRead) -> Iterator[RecordItem | Problem]:
    """The records of a batch whose CRC checks out (``--print-data-log``), decoded by
    ``strom.records``; a ``Problem`` when they do not decode."""
    header, position = read.item.header, read.item.position
    where = f"batch at byte {position} (base offset {header.base_offset})"
    try:
        records = decode_batch(read.data).records
    except (CorruptRecordError, UnsupportedCompressionTypeError) as exc:
        yield Problem(f"{where}: {exc}", position=position)
        return
    for record in records:
        sequence = -1
        if header.base_sequence >= 0:
            delta = record.offset - header.base_offset
            sequence = (header.base_sequence + delta) % _SEQUENCE_WRAP
        control = None
        problem = None
        if header.is_control:
            try:
                control = decode_control_record(record.key, record.value)
            except CorruptRecordError as exc:
                problem = Problem(
                    f"{where}: record at offset {record.offset}: {exc}", position=position
                )
        yield RecordItem(record, header.is_log_append_time, sequence, control)
        if problem is not None:
            yield problem

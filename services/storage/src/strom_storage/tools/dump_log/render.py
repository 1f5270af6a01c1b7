"""Items as text (kafka-dump-log's ``name: value`` lines) or as one JSON object per line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from strom.records import Compression
from strom.records.header import ATTR_DELETE_HORIZON
from strom.records.printable import json_bytes, show_bytes, show_key
from strom_storage.tools.dump_log.report import (
    AbortedTxnItem,
    BatchItem,
    CheckpointItem,
    FileKind,
    FileStart,
    IndexEntryItem,
    Item,
    LeaderEpochItem,
    MarkerItem,
    Note,
    Problem,
    ProducerItem,
    RecordItem,
    SnapshotItem,
    UnusedSlotsItem,
)

__all__ = ["json_line", "text_line"]


def _codec(code: int) -> str:
    try:
        return Compression(code).name.lower()
    except ValueError:
        return f"unknown({code})"


def _timestamp_type(log_append_time: bool) -> str:
    return "LogAppendTime" if log_append_time else "CreateTime"


def _batch_fields(item: BatchItem) -> dict[str, Any]:
    h = item.header
    horizon = h.first_timestamp if h.attributes & ATTR_DELETE_HORIZON else None
    return {
        "baseOffset": h.base_offset,
        "lastOffset": h.last_offset,
        "count": h.record_count,
        "baseSequence": h.base_sequence,
        "lastSequence": h.last_sequence,
        "producerId": h.producer_id,
        "producerEpoch": h.producer_epoch,
        "partitionLeaderEpoch": h.partition_leader_epoch,
        "isTransactional": h.is_transactional,
        "isControl": h.is_control,
        "deleteHorizonMs": horizon,
        "position": item.position,
        "timestampType": _timestamp_type(h.is_log_append_time),
        "maxTimestamp": h.max_timestamp,
        "size": h.size,
        "magic": h.magic,
        "compresscodec": _codec(h.compression),
        "crc": h.crc,
        "isvalid": item.crc_valid,
    }


def _producer_fields(item: ProducerItem) -> dict[str, Any]:
    e = item.entry
    return {
        "producerId": e.producer_id,
        "producerEpoch": e.producer_epoch,
        "lastSequence": e.last_seq,
        "lastOffset": e.batches[-1].last_offset if e.batches else -1,
        "lastTimestamp": e.last_timestamp,
        "endedEpoch": e.ended_epoch,
        "coordinatorEpoch": e.coordinator_epoch,
        "currentTxnFirstOffset": e.txn_first_offset,
        "position": item.position,
        "batches": [
            {
                "firstSequence": b.first_seq,
                "lastSequence": b.last_seq,
                "firstOffset": b.first_offset,
                "lastOffset": b.last_offset,
                "offsetDelta": b.offset_delta,
                "maxTimestamp": b.max_timestamp,
            }
            for b in e.batches
        ],
    }


def _aborted_fields(item: AbortedTxnItem) -> dict[str, Any]:
    t = item.txn
    return {
        "producerId": t.producer_id,
        "firstOffset": t.first_offset,
        "lastOffset": t.last_offset,
        "lastStableOffset": t.last_stable_offset,
        "position": item.position,
    }


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "none"
    return str(value)


def _pairs(fields: dict[str, Any]) -> str:
    return " ".join(f"{name}: {_value(value)}" for name, value in fields.items())


def _batch_text(item: BatchItem) -> str:
    fields = _batch_fields(item)
    text: dict[str, Any] = {}
    for name, value in fields.items():
        if name == "timestampType":
            continue
        text[fields["timestampType"] if name == "maxTimestamp" else name] = value
    return _pairs(text)


def _record_text(item: RecordItem) -> str:
    r = item.record
    parts = [
        f"| offset: {r.offset}",
        f"{_timestamp_type(item.log_append_time)}: {r.timestamp}",
        f"keySize: {-1 if r.key is None else len(r.key)}",
        f"valueSize: {-1 if r.value is None else len(r.value)}",
        f"sequence: {item.sequence}",
    ]
    control = item.control
    if control is not None and control.coordinator_epoch is not None:
        parts.append(f"endTxnMarker: {control.type_name}")
        parts.append(f"coordinatorEpoch: {control.coordinator_epoch}")
        return " ".join(parts)
    if control is not None:
        parts.append(f"controlType: {control.type_name}")
    headers = ", ".join(f"{show_key(k)}={show_bytes(v)}" for k, v in r.headers)
    parts.append(f"headers: [{headers}]")
    parts.append(f"key: {show_bytes(r.key)}")
    parts.append(f"payload: {show_bytes(r.value)}")
    return " ".join(parts)


def _producer_text(item: ProducerItem) -> str:
    fields = _producer_fields(item)
    batches = fields.pop("batches")
    lines = [f"{_pairs(fields)} batches: {len(batches)}"]
    lines.extend(f"| {_pairs(batch)}" for batch in batches)
    return "\n".join(lines)


def _file_text(path: Path, item: FileStart) -> str:
    lines = [f"Dumping {path}"]
    if item.kind is FileKind.LOG and item.base_offset is not None:
        lines.append(f"Log starting offset: {item.base_offset}")
    elif item.kind is FileKind.SNAPSHOT and item.base_offset is not None:
        lines.append(f"Producer state of the batches below offset: {item.base_offset}")
    return "\n".join(lines)


def text_line(path: Path, item: Item) -> str:
    """The text of one item (a few lines for a producer and its batches)."""
    match item:
        case FileStart():
            return _file_text(path, item)
        case BatchItem():
            return _batch_text(item)
        case RecordItem():
            return _record_text(item)
        case IndexEntryItem(kind=FileKind.OFFSET_INDEX):
            return f"offset: {item.key} position: {item.value}"
        case IndexEntryItem():
            return f"timestamp: {item.key} offset: {item.value}"
        case UnusedSlotsItem():
            return (
                f"unused: {item.count} zeroed entries from byte {item.position} "
                "(the preallocated room of an active segment's index)"
            )
        case AbortedTxnItem():
            return _pairs(_aborted_fields(item))
        case SnapshotItem():
            h = item.header
            return (
                f"version: {h.version} crc: {h.crc} isvalid: {_value(item.crc_valid)} "
                f"producerCount: {h.producer_count}"
            )
        case ProducerItem():
            return _producer_text(item)
        case CheckpointItem():
            return f"offset: {item.offset}"
        case LeaderEpochItem():
            return f"epoch: {item.epoch} startOffset: {item.start_offset}"
        case MarkerItem():
            return "clean shutdown marker: the log was closed cleanly and not opened since"
        case Note():
            return f"note: {item.message}"
        case Problem():
            return f"{item.kind.name} {path}: {item.message}"
    raise TypeError(f"not a dump item: {item!r}")


def _json_fields(item: Item) -> dict[str, Any]:
    match item:
        case FileStart():
            return {"kind": item.kind.value, "baseOffset": item.base_offset, "size": item.size}
        case BatchItem():
            return _batch_fields(item)
        case RecordItem():
            r, control = item.record, item.control
            return {
                "offset": r.offset,
                "timestampType": _timestamp_type(item.log_append_time),
                "timestamp": r.timestamp,
                "sequence": item.sequence,
                "key": json_bytes(r.key),
                "value": json_bytes(r.value),
                "headers": [{"key": k, "value": json_bytes(v)} for k, v in r.headers],
                "control": None
                if control is None
                else {
                    "type": control.type_name,
                    "version": control.version,
                    "coordinatorEpoch": control.coordinator_epoch,
                },
            }
        case IndexEntryItem(kind=FileKind.OFFSET_INDEX):
            return {"entry": item.entry, "offset": item.key, "position": item.value}
        case IndexEntryItem():
            return {"entry": item.entry, "timestamp": item.key, "offset": item.value}
        case UnusedSlotsItem():
            return {"count": item.count, "position": item.position}
        case AbortedTxnItem():
            return {"entry": item.entry, **_aborted_fields(item)}
        case SnapshotItem():
            h = item.header
            return {
                "version": h.version,
                "crc": h.crc,
                "isvalid": item.crc_valid,
                "producerCount": h.producer_count,
            }
        case ProducerItem():
            return {"index": item.index, **_producer_fields(item)}
        case CheckpointItem():
            return {"offset": item.offset}
        case LeaderEpochItem():
            return {"epoch": item.epoch, "startOffset": item.start_offset}
        case MarkerItem():
            return {}
        case Note():
            return {"message": item.message}
        case Problem():
            return {
                "kind": item.kind.value,
                "message": item.message,
                "position": item.position,
                "entry": item.entry,
                "line": item.line,
            }
    raise TypeError(f"not a dump item: {item!r}")


_JSON_TYPES = {
    FileStart: "file",
    BatchItem: "batch",
    RecordItem: "record",
    IndexEntryItem: "index-entry",
    UnusedSlotsItem: "unused-slots",
    AbortedTxnItem: "aborted-txn",
    SnapshotItem: "snapshot",
    ProducerItem: "producer",
    CheckpointItem: "checkpoint",
    LeaderEpochItem: "leader-epoch",
    MarkerItem: "clean-shutdown-marker",
    Note: "note",
    Problem: "problem",
}


def json_line(path: Path, item: Item) -> str:
    """One JSON object (ASCII only: nothing a terminal could interpret) for one item."""
    document = {"file": str(path), "type": _JSON_TYPES[type(item)], **_json_fields(item)}
    return json.dumps(document, ensure_ascii=True)

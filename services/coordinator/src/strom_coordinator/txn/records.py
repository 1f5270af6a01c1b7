"""The record codec of ``__transaction_state``.

Keys (big-endian) start with an int16 version saying what the record is::

    transaction key      (version 0)       transactional_id: int16 byte length + UTF-8
    staged commit key    (version 1)       commit_id: int16 byte length + UTF-8
    ownership marker key (version 0x7FFF)  (nothing: one key per partition)

Values:

* transaction value: one UTF-8 JSON object (the whole state of the id, ``TxnMetadata``)::

      {"version": 0, "producer_id": int, "producer_epoch": int, "timeout_ms": int,
       "state": "Empty" | "Ongoing" | "PrepareCommit" | "PrepareAbort" | "CompleteCommit"
                | "CompleteAbort",
       "partitions": [[topic, partition], ...], "groups": [group id, ...],
       "start_ms": int (-1: none open), "last_update_ms": int,
       "txn_producer_id": int, "txn_epoch": int (the ended transaction, -1: none),
       "aborted_by_timeout": bool}

  A newer ``version`` than this code knows is refused (``InvalidRecordError``); unknown extra
  fields are ignored. A tombstone (None value) deletes the id (expiry).
* staged commit value: one UTF-8 JSON object (the last decision of the commit id,
  ``staged.Decision``)::

      {"version": 0, "sequence": int, "state": "Committing" | "Committed",
       "members": [[transactional_id, producer_id, producer_epoch], ...],
       "metadata": base64 string, "failed_members": [[...], ...], "last_update_ms": int}

  Versioned and tolerant like the transaction value; a tombstone deletes the commit id.
* ownership marker value: int16 version 0, coordinator_id int32, owner producer epoch int32
  (written first by a new owner of the partition; replay ignores it).
"""

from __future__ import annotations

import base64
import binascii
import json
import struct
from typing import NamedTuple

from strom.errors import InvalidRecordError
from strom.types import StagedTransaction
from strom_coordinator.txn.staged import Decision, StagedState
from strom_coordinator.txn.state import TxnMetadata, TxnState

__all__ = [
    "TRANSACTION_STATE_TOPIC",
    "StagedCommitKey",
    "decode_key",
    "decode_staged_value",
    "decode_value",
    "encode_staged_value",
    "encode_value",
    "ownership_marker",
    "staged_commit_key",
    "transaction_key",
]

#: The compacted internal topic these records live in.
TRANSACTION_STATE_TOPIC = "__transaction_state"


class StagedCommitKey(NamedTuple):
    """The key of a commit id's decision."""

    commit_id: str


_KEY_VERSION = 0
_STAGED_KEY_VERSION = 1
_STAGED_STATES = {s.value: s for s in StagedState}
_MARKER_KEY_VERSION = 0x7FFF
_VALUE_VERSION = 0
_STATES = {s.value: s for s in TxnState}


def transaction_key(transactional_id: str) -> bytes:
    data = transactional_id.encode()
    return struct.pack(">hh", _KEY_VERSION, len(data)) + data


def staged_commit_key(commit_id: str) -> bytes:
    data = commit_id.encode()
    return struct.pack(">hh", _STAGED_KEY_VERSION, len(data)) + data


def decode_key(key: bytes) -> str | StagedCommitKey | None:
    """The transactional id of a key, a ``StagedCommitKey``, or None for an ownership
    marker."""
    if len(key) < 2:
        raise InvalidRecordError("transaction state key shorter than its version")
    (version,) = struct.unpack_from(">h", key)
    if version == _MARKER_KEY_VERSION:
        return None
    if version not in (_KEY_VERSION, _STAGED_KEY_VERSION) or len(key) < 4:
        raise InvalidRecordError(f"unknown transaction state key version {version}")
    (length,) = struct.unpack_from(">h", key, 2)
    if length < 0 or len(key) != 4 + length:
        raise InvalidRecordError("transaction state key length does not match")
    try:
        name = key[4:].decode()
    except UnicodeDecodeError as exc:
        raise InvalidRecordError(f"transaction state key is not UTF-8: {exc}") from exc
    return StagedCommitKey(name) if version == _STAGED_KEY_VERSION else name


def _members(items: object) -> tuple[StagedTransaction, ...]:
    if not isinstance(items, list):
        raise TypeError("members must be a list")
    return tuple(StagedTransaction(str(t), int(p), int(e)) for t, p, e in items)


def encode_staged_value(decision: Decision) -> bytes:
    doc = {
        "version": _VALUE_VERSION,
        "sequence": decision.sequence,
        "state": decision.state.value,
        "members": [[m.transactional_id, m.producer_id, m.producer_epoch]
                    for m in decision.members],
        "metadata": base64.b64encode(decision.metadata).decode(),
        "failed_members": [[m.transactional_id, m.producer_id, m.producer_epoch]
                           for m in decision.failed_members],
        "last_update_ms": decision.last_update_ms,
    }  # fmt: skip
    return json.dumps(doc, separators=(",", ":")).encode()


def decode_staged_value(commit_id: str, value: bytes) -> Decision:
    try:
        doc = json.loads(value)
        version = int(doc["version"])
        if version > _VALUE_VERSION:
            raise InvalidRecordError(f"staged commit value version {version} is too new")
        return Decision(
            commit_id=commit_id,
            sequence=int(doc["sequence"]),
            state=_STAGED_STATES[doc["state"]],
            members=_members(doc["members"]),
            metadata=base64.b64decode(doc["metadata"], validate=True),
            failed_members=_members(doc["failed_members"]),
            last_update_ms=int(doc["last_update_ms"]),
        )
    except InvalidRecordError:
        raise
    except (ValueError, KeyError, TypeError, binascii.Error) as exc:
        raise InvalidRecordError(f"malformed staged commit value: {exc!r}") from exc


def encode_value(meta: TxnMetadata) -> bytes:
    doc = {
        "version": _VALUE_VERSION,
        "producer_id": meta.producer_id,
        "producer_epoch": meta.producer_epoch,
        "timeout_ms": meta.timeout_ms,
        "state": meta.state.value,
        "partitions": sorted([t, p] for t, p in meta.partitions),
        "groups": sorted(meta.groups),
        "start_ms": meta.start_ms,
        "last_update_ms": meta.last_update_ms,
        "txn_producer_id": meta.txn_producer_id,
        "txn_epoch": meta.txn_epoch,
        "aborted_by_timeout": meta.aborted_by_timeout,
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def decode_value(transactional_id: str, value: bytes) -> TxnMetadata:
    try:
        doc = json.loads(value)
        version = int(doc["version"])
        if version > _VALUE_VERSION:
            raise InvalidRecordError(f"transaction state value version {version} is too new")
        return TxnMetadata(
            transactional_id=transactional_id,
            producer_id=int(doc["producer_id"]),
            producer_epoch=int(doc["producer_epoch"]),
            timeout_ms=int(doc["timeout_ms"]),
            state=_STATES[doc["state"]],
            partitions=frozenset((str(t), int(p)) for t, p in doc["partitions"]),
            groups=frozenset(str(g) for g in doc["groups"]),
            start_ms=int(doc["start_ms"]),
            last_update_ms=int(doc["last_update_ms"]),
            txn_producer_id=int(doc["txn_producer_id"]),
            txn_epoch=int(doc["txn_epoch"]),
            aborted_by_timeout=bool(doc["aborted_by_timeout"]),
        )
    except InvalidRecordError:
        raise
    except (ValueError, KeyError, TypeError) as exc:
        raise InvalidRecordError(f"malformed transaction state value: {exc!r}") from exc


def ownership_marker(coordinator_id: int, owner_epoch: int) -> tuple[bytes, bytes]:
    """The record a new owner writes first into a partition it took over."""
    key = struct.pack(">h", _MARKER_KEY_VERSION)
    return key, struct.pack(">hii", 0, coordinator_id, owner_epoch)

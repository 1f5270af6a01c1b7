"""The record codec of __consumer_offsets (Kafka's layout, big-endian).

Keys start with an int16 version that says what the record is; strings are an int16 byte length
and UTF-8 bytes (nullable strings use length -1), byte arrays an int32 length::

    offset commit key    (version 0 or 1)  group: string, topic: string, partition: int32
    group metadata key   (version 2)       group: string
    ownership marker key (version 0x7FFF)  (nothing: one key per partition, so compaction keeps
                                            only the newest marker)
    pending txn offset key (version 0x7FF0) group: string, producer_id int64, topic: string,
                                            partition: int32
    ended txn key        (version 0x7FF1)  group: string, producer_id int64

    offset commit value  version int16 (0..3), offset int64,
                         [v3+] leader_epoch int32 (-1 = unknown), metadata string,
                         commit_timestamp int64, [v1 only] expire_timestamp int64
    group metadata value version int16 (0..3), protocol_type string, generation int32,
                         protocol nullable string, leader nullable string,
                         [v2+] current_state_timestamp int64 (-1 = unknown),
                         members int32 count of:
                           member_id string, [v3+] group_instance_id nullable string,
                           client_id string, client_host string,
                           [v1+] rebalance_timeout int32, session_timeout int32,
                           subscription bytes, assignment bytes
    ownership marker value version int16 (0), coordinator_id int32, owner_epoch int32
    pending txn offset value version int16 (0), producer_epoch int16, offset int64,
                         leader_epoch int32, metadata string, commit_timestamp int64
    ended txn value      version int16 (0), producer_epoch int16

A pending transactional offset (Strom's own record kind, not Kafka's: Kafka writes them as
offset records inside the transaction's batch) is one partition's offset staged by
TxnOffsetCommit for (group, producer id); the transaction's marker turns it into an offset
commit record (commit) or drops it, and either way writes its tombstone in the same batch.
Its key version sits far above Kafka's key versions so that none of theirs can collide.
A marker that finds nothing pending for (group, producer id) in memory writes an
ended-transaction record with the transaction's epoch: replay drops what that producer still had
pending at that epoch or below before it, so a pending record that reached the log but not the
memory of the coordinator that handled the marker (the previous owner's write, committed after
the new owner loaded) does not come back pending at the next load.

Strom writes offset keys v1, group keys v2, offset values v3 and group values v3, and decodes
every older version. A tombstone (None value) deletes the key's offset or group. Key bytes are a
pure function of the key fields, so compaction collapses every commit of one partition.
Malformed bytes raise ``InvalidRecordError`` naming what is wrong.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

from strom.errors import InvalidRecordError

__all__ = [
    "OFFSETS_TOPIC",
    "EndedKey",
    "GroupKey",
    "GroupMetadataValue",
    "MarkerKey",
    "MemberRecord",
    "OffsetKey",
    "OffsetValue",
    "PendingKey",
    "PendingValue",
    "decode_ended_value",
    "decode_group_value",
    "decode_key",
    "decode_offset_value",
    "decode_pending_value",
    "encode_group_value",
    "ended_key",
    "ended_value",
    "group_key",
    "offset_key",
    "offset_value",
    "ownership_marker",
    "pending_key",
    "pending_value",
]

#: The compacted internal topic these records live in.
OFFSETS_TOPIC = "__consumer_offsets"

_OFFSET_KEY_VERSION = 1
_GROUP_KEY_VERSION = 2
_MARKER_KEY_VERSION = 0x7FFF
_PENDING_KEY_VERSION = 0x7FF0
_PENDING_VALUE_VERSION = 0
_ENDED_KEY_VERSION = 0x7FF1
_ENDED_VALUE_VERSION = 0
_OFFSET_VALUE_VERSION = 3
_GROUP_VALUE_VERSION = 3
_MAX_STRING = 0x7FFF


@dataclass(frozen=True)
class OffsetKey:
    group_id: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupKey:
    group_id: str


@dataclass(frozen=True)
class MarkerKey:
    """The ownership marker's key: carries no group and is ignored by replay."""


@dataclass(frozen=True)
class PendingKey:
    """A transactional offset staged by ``producer_id`` for the group, not yet committed."""

    group_id: str
    producer_id: int
    topic: str
    partition: int


@dataclass(frozen=True)
class EndedKey:
    """The last transaction of ``producer_id`` whose marker reached the group."""

    group_id: str
    producer_id: int


@dataclass(frozen=True)
class PendingValue:
    producer_epoch: int
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp_ms: int = 0


@dataclass(frozen=True)
class OffsetValue:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp_ms: int = 0
    expire_timestamp_ms: int | None = None


@dataclass(frozen=True)
class MemberRecord:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupMetadataValue:
    protocol_type: str
    generation_id: int
    protocol_name: str | None
    leader_id: str | None
    current_state_timestamp_ms: int = -1
    members: Sequence[MemberRecord] = field(default_factory=tuple)


class _Writer:
    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def int16(self, v: int) -> _Writer:
        self._parts.append(struct.pack(">h", v))
        return self

    def int32(self, v: int) -> _Writer:
        self._parts.append(struct.pack(">i", v))
        return self

    def int64(self, v: int) -> _Writer:
        self._parts.append(struct.pack(">q", v))
        return self

    def string(self, v: str | None) -> _Writer:
        if v is None:
            return self.int16(-1)
        data = v.encode()
        if len(data) > _MAX_STRING:
            raise InvalidRecordError(f"string of {len(data)} bytes exceeds {_MAX_STRING}")
        self.int16(len(data))
        self._parts.append(data)
        return self

    def bytes_(self, v: bytes) -> _Writer:
        self.int32(len(v))
        self._parts.append(bytes(v))
        return self

    def done(self) -> bytes:
        return b"".join(self._parts)


class _Reader:
    def __init__(self, data: bytes, what: str) -> None:
        self._data = memoryview(data)
        self._pos = 0
        self._what = what

    def _take(self, n: int) -> memoryview:
        if n < 0 or self._pos + n > len(self._data):
            raise InvalidRecordError(
                f"{self._what}: truncated at byte {self._pos} (needs {n} more of "
                f"{len(self._data) - self._pos} left)"
            )
        chunk = self._data[self._pos : self._pos + n]
        self._pos += n
        return chunk

    def int16(self) -> int:
        return int(struct.unpack(">h", self._take(2))[0])

    def int32(self) -> int:
        return int(struct.unpack(">i", self._take(4))[0])

    def int64(self) -> int:
        return int(struct.unpack(">q", self._take(8))[0])

    def nullable_string(self) -> str | None:
        n = self.int16()
        if n == -1:
            return None
        if n < 0:
            raise InvalidRecordError(f"{self._what}: negative string length {n}")
        try:
            return bytes(self._take(n)).decode()
        except UnicodeDecodeError as e:
            raise InvalidRecordError(f"{self._what}: string is not UTF-8 ({e})") from None

    def string(self) -> str:
        value = self.nullable_string()
        if value is None:
            raise InvalidRecordError(f"{self._what}: null where a string is required")
        return value

    def bytes_(self) -> bytes:
        n = self.int32()
        if n == -1:
            return b""
        if n < 0:
            raise InvalidRecordError(f"{self._what}: negative bytes length {n}")
        return bytes(self._take(n))

    def end(self) -> None:
        if self._pos != len(self._data):
            raise InvalidRecordError(
                f"{self._what}: {len(self._data) - self._pos} unexpected trailing bytes"
            )


def offset_key(group_id: str, topic: str, partition: int) -> bytes:
    """Key of a group's committed offset for one partition."""
    w = _Writer().int16(_OFFSET_KEY_VERSION).string(group_id).string(topic)
    return w.int32(partition).done()


def group_key(group_id: str) -> bytes:
    """Key of a group's metadata (generation, protocol, members and assignment)."""
    return _Writer().int16(_GROUP_KEY_VERSION).string(group_id).done()


def ownership_marker(coordinator_id: int, owner_epoch: int) -> tuple[bytes, bytes]:
    """The record a new owner writes first into a partition it took over (replay ignores it)."""
    key = _Writer().int16(_MARKER_KEY_VERSION).done()
    value = _Writer().int16(0).int32(coordinator_id).int32(owner_epoch).done()
    return key, value


def pending_key(group_id: str, producer_id: int, topic: str, partition: int) -> bytes:
    """Key of a transactional offset staged by ``producer_id`` for one partition."""
    w = _Writer().int16(_PENDING_KEY_VERSION).string(group_id).int64(producer_id)
    return w.string(topic).int32(partition).done()


def pending_value(value: PendingValue) -> bytes:
    w = _Writer().int16(_PENDING_VALUE_VERSION).int16(value.producer_epoch).int64(value.offset)
    w.int32(value.leader_epoch).string(value.metadata).int64(value.commit_timestamp_ms)
    return w.done()


def decode_pending_value(data: bytes) -> PendingValue:
    r = _Reader(data, "pending transactional offset value")
    version = r.int16()
    if version != _PENDING_VALUE_VERSION:
        raise InvalidRecordError(f"pending transactional offset value: unknown version {version}")
    value = PendingValue(r.int16(), r.int64(), r.int32(), r.string(), r.int64())
    r.end()
    return value


def ended_key(group_id: str, producer_id: int) -> bytes:
    """Key of the ended-transaction record of ``producer_id`` in the group."""
    return _Writer().int16(_ENDED_KEY_VERSION).string(group_id).int64(producer_id).done()


def ended_value(producer_epoch: int) -> bytes:
    return _Writer().int16(_ENDED_VALUE_VERSION).int16(producer_epoch).done()


def decode_ended_value(data: bytes) -> int:
    """The producer epoch of an ended-transaction record."""
    r = _Reader(data, "ended transaction value")
    version = r.int16()
    if version != _ENDED_VALUE_VERSION:
        raise InvalidRecordError(f"ended transaction value: unknown version {version}")
    epoch = r.int16()
    r.end()
    return epoch


Key = OffsetKey | GroupKey | MarkerKey | PendingKey | EndedKey


def decode_key(data: bytes) -> Key:
    """What a key names; ``InvalidRecordError`` for bytes no version explains."""
    r = _Reader(data, "__consumer_offsets key")
    version = r.int16()
    key: Key
    if version in (0, 1):
        key = OffsetKey(r.string(), r.string(), r.int32())
    elif version == _GROUP_KEY_VERSION:
        key = GroupKey(r.string())
    elif version == _MARKER_KEY_VERSION:
        key = MarkerKey()
    elif version == _PENDING_KEY_VERSION:
        key = PendingKey(r.string(), r.int64(), r.string(), r.int32())
    elif version == _ENDED_KEY_VERSION:
        key = EndedKey(r.string(), r.int64())
    else:
        raise InvalidRecordError(f"__consumer_offsets key: unknown version {version}")
    r.end()
    return key


def offset_value(value: OffsetValue) -> bytes:
    w = _Writer().int16(_OFFSET_VALUE_VERSION).int64(value.offset).int32(value.leader_epoch)
    return w.string(value.metadata).int64(value.commit_timestamp_ms).done()


def decode_offset_value(data: bytes) -> OffsetValue:
    r = _Reader(data, "offset commit value")
    version = r.int16()
    if not 0 <= version <= 3:
        raise InvalidRecordError(f"offset commit value: unknown version {version}")
    offset = r.int64()
    leader_epoch = r.int32() if version >= 3 else -1
    metadata = r.string()
    commit_ts = r.int64()
    expire_ts = r.int64() if version == 1 else None
    r.end()
    return OffsetValue(offset, leader_epoch, metadata, commit_ts, expire_ts)


def encode_group_value(value: GroupMetadataValue) -> bytes:
    w = _Writer().int16(_GROUP_VALUE_VERSION).string(value.protocol_type)
    w.int32(value.generation_id).string(value.protocol_name).string(value.leader_id)
    w.int64(value.current_state_timestamp_ms).int32(len(value.members))
    for m in value.members:
        w.string(m.member_id).string(m.group_instance_id).string(m.client_id)
        w.string(m.client_host).int32(m.rebalance_timeout_ms).int32(m.session_timeout_ms)
        w.bytes_(m.subscription).bytes_(m.assignment)
    return w.done()


def decode_group_value(data: bytes) -> GroupMetadataValue:
    r = _Reader(data, "group metadata value")
    version = r.int16()
    if not 0 <= version <= 3:
        raise InvalidRecordError(f"group metadata value: unknown version {version}")
    protocol_type = r.string()
    generation = r.int32()
    protocol = r.nullable_string()
    leader = r.nullable_string()
    state_ts = r.int64() if version >= 2 else -1
    count = r.int32()
    if count < 0:
        raise InvalidRecordError(f"group metadata value: negative member count {count}")
    members = []
    for _ in range(count):
        member_id = r.string()
        instance_id = r.nullable_string() if version >= 3 else None
        client_id = r.string()
        client_host = r.string()
        session_timeout = r.int32()
        rebalance_timeout = session_timeout
        if version >= 1:
            rebalance_timeout, session_timeout = session_timeout, r.int32()
        members.append(
            MemberRecord(
                member_id,
                instance_id,
                client_id,
                client_host,
                rebalance_timeout,
                session_timeout,
                r.bytes_(),
                r.bytes_(),
            )
        )
    r.end()
    return GroupMetadataValue(protocol_type, generation, protocol, leader, state_ts, members)

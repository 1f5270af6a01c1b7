"""Groups <-> __consumer_offsets records: the group metadata record membership writes, and how
loading a partition replays its records into groups and committed offsets.

Pure functions over the model (no I/O, no event loop)."""

from __future__ import annotations

from strom_coordinator.group import records
from strom_coordinator.group.model import (
    CommittedOffset,
    Group,
    GroupState,
    Member,
    PendingTxnOffset,
)

__all__ = ["group_record", "replay_record", "stage"]


def group_record(group: Group) -> tuple[bytes, bytes]:
    """The group metadata record of the group's current generation and assignment."""
    value = records.GroupMetadataValue(
        protocol_type=group.protocol_type or "",
        generation_id=group.generation_id,
        protocol_name=group.protocol_name,
        leader_id=group.leader_id,
        current_state_timestamp_ms=group.state_timestamp_ms or -1,
        members=[
            records.MemberRecord(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                m.metadata_for(group.protocol_name),
                m.assignment,
            )
            for m in group.members.values()
        ],
    )
    return records.group_key(group.group_id), records.encode_group_value(value)


def replay_record(
    groups: dict[str, Group], partition: int, key: bytes, value: bytes | None
) -> None:
    """Apply one record read from ``partition`` to ``groups``; ``InvalidRecordError`` if the
    bytes are malformed. Ownership markers are ignored."""
    decoded = records.decode_key(key)
    if isinstance(decoded, records.OffsetKey):
        _replay_offset(groups, partition, decoded, value)
    elif isinstance(decoded, records.GroupKey):
        _replay_group(groups, partition, decoded.group_id, value)
    elif isinstance(decoded, records.PendingKey):
        _replay_pending(groups, partition, decoded, value)
    elif isinstance(decoded, records.EndedKey):
        _replay_ended(groups, decoded, value)


def _replay_pending(
    groups: dict[str, Group], partition: int, key: records.PendingKey, value: bytes | None
) -> None:
    group = groups.get(key.group_id)
    tp = (key.topic, key.partition)
    if value is None:
        if group is not None:
            group.unstage(key.producer_id, tp)
        return
    v = records.decode_pending_value(value)
    if group is None:
        group = groups[key.group_id] = Group(key.group_id, partition)
    offset = CommittedOffset(v.offset, v.leader_epoch, v.metadata, v.commit_timestamp_ms)
    stage(group, key.producer_id, tp, PendingTxnOffset(v.producer_epoch, offset))


def stage(group: Group, producer_id: int, tp: tuple[str, int], entry: PendingTxnOffset) -> bool:
    """Make ``entry`` the offset ``producer_id`` has pending for ``tp``, unless it is a late
    write of a transaction that already ended: an epoch below one whose marker reached the
    group, or below the epoch of what is pending already (a producer's epochs only grow; a
    deposed coordinator's write can land after its successor's). Whether it was staged."""
    if entry.producer_epoch < group.txn_ended.get(producer_id, -1):
        return False
    current = group.pending_txn.get(producer_id, {}).get(tp)
    if current is not None and current.producer_epoch > entry.producer_epoch:
        return False
    group.pending_txn.setdefault(producer_id, {})[tp] = entry
    return True


def _replay_ended(groups: dict[str, Group], key: records.EndedKey, value: bytes | None) -> None:
    """A marker reached the group: what the producer had pending at its epoch or below, in
    the log before this record, is gone (a record the marker's coordinator never loaded)."""
    group = groups.get(key.group_id)
    if value is None or group is None:
        return
    epoch = records.decode_ended_value(value)
    group.txn_ended[key.producer_id] = epoch
    staged = group.pending_txn.get(key.producer_id, {})
    for tp, entry in list(staged.items()):
        if entry.producer_epoch <= epoch:
            group.unstage(key.producer_id, tp)


def _replay_offset(
    groups: dict[str, Group], partition: int, key: records.OffsetKey, value: bytes | None
) -> None:
    group = groups.get(key.group_id)
    tp = (key.topic, key.partition)
    if value is None:
        if group is not None:
            group.offsets.pop(tp, None)
        return
    v = records.decode_offset_value(value)
    if group is None:
        group = groups[key.group_id] = Group(key.group_id, partition)
    group.offsets[tp] = CommittedOffset(
        v.offset, v.leader_epoch, v.metadata, v.commit_timestamp_ms, v.expire_timestamp_ms
    )


def _replay_group(
    groups: dict[str, Group], partition: int, group_id: str, value: bytes | None
) -> None:
    old = groups.get(group_id)
    if value is None:  # the group was deleted; offsets written later may bring it back
        if old is not None and (old.offsets or old.pending_txn):
            groups[group_id] = Group(
                group_id,
                partition,
                offsets=old.offsets,
                pending_txn=old.pending_txn,
                txn_ended=old.txn_ended,
            )
        else:
            groups.pop(group_id, None)
        return
    v = records.decode_group_value(value)
    group = Group(
        group_id,
        partition,
        protocol_type=v.protocol_type,
        protocol_name=v.protocol_name,
        generation_id=v.generation_id,
        leader_id=v.leader_id,
        offsets=old.offsets if old is not None else {},
        pending_txn=old.pending_txn if old is not None else {},
        txn_ended=old.txn_ended if old is not None else {},
        state_timestamp_ms=(
            v.current_state_timestamp_ms if v.current_state_timestamp_ms >= 0 else None
        ),
    )
    for m in v.members:
        group.add(
            Member(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                session_timeout_ms=m.session_timeout_ms,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                protocol_type=v.protocol_type,
                protocols=[(v.protocol_name or "", m.subscription)],
                assignment=m.assignment,
            )
        )
    if v.leader_id in group.members:
        group.leader_id = v.leader_id
    group.state = GroupState.STABLE if group.members else GroupState.EMPTY
    groups[group_id] = group

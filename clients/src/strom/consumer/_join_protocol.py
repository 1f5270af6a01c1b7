"""What a consumer puts in JoinGroup and SyncGroup (Kafka's "consumer" protocol type).

A member offers one protocol per configured assignor, each carrying its ``Subscription``
(topics, the assignor's user data, owned partitions for the cooperative protocol). The leader
decodes every member's subscription and runs the group's assignor over the partition counts;
each member's share travels back as an encoded ``Assignment`` in SyncGroup.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from strom.group.assignors import PartitionAssignor
from strom.group.protocol import (
    Subscription,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from strom.protocol.v1 import coordinator_pb2
from strom.types import TopicPartition

__all__ = ["join_protocols", "leader_assignment", "member_subscriptions"]


def join_protocols(
    assignors: Sequence[PartitionAssignor],
    topics: Iterable[str],
    owned: Iterable[TopicPartition],
    generation: int,
) -> list[coordinator_pb2.GroupProtocol]:
    """One protocol per assignor, in order of preference."""
    names = sorted(topics)
    owned_list = sorted(owned)
    return [
        coordinator_pb2.GroupProtocol(
            name=assignor.name,
            metadata=encode_subscription(
                Subscription(
                    topics=names,
                    user_data=assignor.subscription_user_data(set(names)),
                    owned_partitions=owned_list,
                    generation_id=generation,
                )
            ),
        )
        for assignor in assignors
    ]


def member_subscriptions(
    members: Iterable[coordinator_pb2.JoinGroupMember],
) -> dict[str, Subscription]:
    """The leader's view: member id -> subscription (InconsistentGroupProtocolError when one
    cannot be decoded)."""
    return {m.member_id: decode_subscription(m.metadata) for m in members}


def leader_assignment(
    assignor: PartitionAssignor,
    partitions_per_topic: Mapping[str, int],
    subscriptions: Mapping[str, Subscription],
) -> list[coordinator_pb2.SyncGroupAssignment]:
    """Every member's share, encoded for SyncGroup."""
    result = assignor.assign(partitions_per_topic, subscriptions)
    return [
        coordinator_pb2.SyncGroupAssignment(
            member_id=member_id, assignment=encode_assignment(assignment)
        )
        for member_id, assignment in sorted(result.items())
    ]

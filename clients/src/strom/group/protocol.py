"""The consumer protocol: what members of a "consumer" group put in JoinGroup and SyncGroup.

Kafka's ConsumerProtocolSubscription / ConsumerProtocolAssignment, big-endian, non-flexible::

    Subscription  := version:int16 topics:[string] user_data:bytes?
                     owned_partitions:[topic:string partitions:[int32]]   (v1+)
                     generation_id:int32                                  (v2+)
                     rack_id:string?                                      (v3+)
    Assignment    := version:int16 assigned:[topic:string partitions:[int32]] user_data:bytes?

Strings carry an int16 length, bytes an int32 length (-1 = null), arrays an int32 count.
Both are written at version 3. Versions 0..3 decode strictly (trailing bytes are an error);
a newer version decodes as version 3 and ignores what follows, so members of a newer
release can still join (Kafka does the same).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from strom.group._wire import Reader, Writer
from strom.types import TopicPartition

__all__ = [
    "ASSIGNMENT_VERSION",
    "PROTOCOL_TYPE",
    "SUBSCRIPTION_VERSION",
    "Assignment",
    "Subscription",
    "decode_assignment",
    "decode_subscription",
    "encode_assignment",
    "encode_subscription",
]

PROTOCOL_TYPE = "consumer"
SUBSCRIPTION_VERSION = 3
ASSIGNMENT_VERSION = 3


@dataclass(frozen=True)
class Subscription:
    """What a member asks for: its topics, its assignor's user data, and (cooperative and
    sticky assignors) the partitions it owns with the generation it got them in."""

    topics: list[str]
    user_data: bytes | None = None
    owned_partitions: list[TopicPartition] = field(default_factory=list)
    generation_id: int = -1
    rack_id: str | None = None


@dataclass(frozen=True)
class Assignment:
    """The partitions the leader assigned to one member, plus assignor user data."""

    partitions: list[TopicPartition]
    user_data: bytes | None = None


def encode_subscription(subscription: Subscription) -> bytes:
    w = Writer()
    w.int16(SUBSCRIPTION_VERSION)
    w.array(subscription.topics, w.string)
    w.bytes_(subscription.user_data)
    write_topic_partitions(w, subscription.owned_partitions)
    w.int32(subscription.generation_id)
    w.string(subscription.rack_id)
    return w.getvalue()


def decode_subscription(data: bytes) -> Subscription:
    r = Reader(data, "consumer subscription")
    version = _read_version(r)
    topics = r.array("topics", lambda: r.required_string("topic"))
    user_data = r.bytes_("user_data")
    owned: list[TopicPartition] = []
    generation_id = -1
    rack_id = None
    if version >= 1:
        owned = read_topic_partitions(r, "owned_partitions")
    if version >= 2:
        generation_id = r.int32("generation_id")
    if version >= 3:
        rack_id = r.string("rack_id", nullable=True)
    if version <= SUBSCRIPTION_VERSION:
        r.expect_end()
    return Subscription(topics, user_data, owned, generation_id, rack_id)


def encode_assignment(assignment: Assignment) -> bytes:
    w = Writer()
    w.int16(ASSIGNMENT_VERSION)
    write_topic_partitions(w, assignment.partitions)
    w.bytes_(assignment.user_data)
    return w.getvalue()


def decode_assignment(data: bytes) -> Assignment:
    r = Reader(data, "consumer assignment")
    version = _read_version(r)
    partitions = read_topic_partitions(r, "assigned_partitions")
    user_data = r.bytes_("user_data")
    if version <= ASSIGNMENT_VERSION:
        r.expect_end()
    return Assignment(partitions, user_data)


def write_topic_partitions(w: Writer, partitions: Iterable[TopicPartition]) -> None:
    """Partitions grouped by topic (topics in order of first appearance)."""
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)

    def write_topic(item: tuple[str, list[int]]) -> None:
        w.string(item[0])
        w.array(item[1], w.int32)

    w.array(by_topic.items(), write_topic)


def read_topic_partitions(r: Reader, name: str) -> list[TopicPartition]:
    def read_topic() -> list[TopicPartition]:
        topic = r.required_string(f"{name} topic")
        return [
            TopicPartition(topic, p) for p in r.array(f"{name} partitions", lambda: r.int32(name))
        ]

    return [tp for group in r.array(name, read_topic) for tp in group]


def _read_version(r: Reader) -> int:
    version = r.int16("version")
    if version < 0:
        raise r.fail(f"unsupported version {version}")
    return version

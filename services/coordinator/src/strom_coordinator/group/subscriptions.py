"""The topics a consumer-protocol member subscribes to, read from its JoinGroup metadata.

The coordinator needs only the topic list (OffsetDelete refuses subscribed topics, expiry keeps
their offsets). It uses ``strom.group.protocol.decode_subscription`` when the client library has
it and otherwise reads the topic array itself: Kafka's ConsumerProtocolSubscription starts, in
every version, with an int16 version and an int32 count of int16-length UTF-8 topic names.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable

__all__ = ["CONSUMER_PROTOCOL_TYPE", "subscribed_topics"]

CONSUMER_PROTOCOL_TYPE = "consumer"


def _decode_topics(data: bytes) -> list[str]:
    if len(data) < 6:
        raise ValueError("subscription shorter than its header")
    (count,) = struct.unpack_from(">i", data, 2)
    if count < 0 or count > len(data):
        raise ValueError(f"bad topic count {count}")
    pos, topics = 6, []
    for _ in range(count):
        (n,) = struct.unpack_from(">h", data, pos)
        if n < 0 or pos + 2 + n > len(data):
            raise ValueError("bad topic name length")
        topics.append(data[pos + 2 : pos + 2 + n].decode())
        pos += 2 + n
    return topics


def _decoder() -> Callable[[bytes], list[str]]:
    try:
        from strom.group.protocol import decode_subscription
    except ImportError:
        return _decode_topics
    return lambda data: list(decode_subscription(data).topics)


def subscribed_topics(metadata: Iterable[bytes]) -> set[str] | None:
    """Union of the topics in the members' subscriptions; None if any cannot be decoded."""
    decode = _decoder()
    topics: set[str] = set()
    for data in metadata:
        try:
            topics.update(decode(data))
        except Exception:  # any malformed subscription makes the set unknown, as Kafka's
            return None
    return topics

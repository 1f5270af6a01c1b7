"""Consumer groups on the client side: the consumer protocol codec and the assignors."""

from __future__ import annotations

from strom.group.assignors import (
    CooperativeStickyAssignor,
    PartitionAssignor,
    RangeAssignor,
    RebalanceProtocol,
    RoundRobinAssignor,
    StickyAssignor,
    assignor_for,
)
from strom.group.protocol import (
    PROTOCOL_TYPE,
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)

__all__ = [
    "PROTOCOL_TYPE",
    "Assignment",
    "CooperativeStickyAssignor",
    "PartitionAssignor",
    "RangeAssignor",
    "RebalanceProtocol",
    "RoundRobinAssignor",
    "StickyAssignor",
    "Subscription",
    "assignor_for",
    "decode_assignment",
    "decode_subscription",
    "encode_assignment",
    "encode_subscription",
]

"""The storage node's request-level domain: partitions it leads, produce, fetch, offsets.

``ReplicaManager`` is what the gRPC servicer calls; it never sees protobuf. Replication
(followers, ISR, acks=all waiting on followers) extends ``Partition`` in its own issue.
"""

from strom_storage.node.partition import Partition
from strom_storage.node.replica_manager import (
    FetchPartitionRequest,
    FetchPartitionResult,
    ListOffsetsResult,
    PartitionOutcome,
    ProducePartitionResult,
    ReplicaManager,
)

__all__ = [
    "FetchPartitionRequest",
    "FetchPartitionResult",
    "ListOffsetsResult",
    "Partition",
    "PartitionOutcome",
    "ProducePartitionResult",
    "ReplicaManager",
]

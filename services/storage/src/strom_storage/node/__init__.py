"""The storage node's request-level domain: the partitions it hosts (leader or follower),
produce, fetch and offsets, transaction markers and verification (``txn``), and the
replication decisions (``Partition``: ISR, high watermark, acks=all waits; ``follower``:
truncation, applying fetched data).

``ReplicaManager`` is what the gRPC servicer calls; it never sees protobuf. The network side of
replication is ``strom_storage.replication``.
"""

from strom_storage.node.hosted import HostedPartitions
from strom_storage.node.partition import Partition
from strom_storage.node.replica_manager import ReplicaManager
from strom_storage.node.results import (
    FetchPartitionRequest,
    FetchPartitionResult,
    ListOffsetsResult,
    PartitionOutcome,
    ProducePartitionResult,
    ProducersResult,
)
from strom_storage.node.txn import TxnMarker, TxnMarkerResult, TxnVerifier

__all__ = [
    "FetchPartitionRequest",
    "FetchPartitionResult",
    "HostedPartitions",
    "ListOffsetsResult",
    "Partition",
    "PartitionOutcome",
    "ProducePartitionResult",
    "ProducersResult",
    "ReplicaManager",
    "TxnMarker",
    "TxnMarkerResult",
    "TxnVerifier",
]

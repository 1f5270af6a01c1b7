"""Partitions of the coordinator's internal, compacted topics, as the domain sees them.

``__consumer_offsets`` and ``__transaction_state``: both map a key (a group id, a transactional
id) to a partition with Kafka's formula, and a coordinator hosts the partitions it owns by
replaying each one when it takes it over. ``hosting`` holds that routing and the load life
cycle, ``log`` the interface of the fenced writer. Plain Python (no gRPC, no etcd): the
runtime (``strom_coordinator.runtime``: ownership, writer, loader) drives and implements them.
Nothing here knows about groups.
"""

"""Partitions of the coordinator's internal, compacted topics, as the domain sees them.

``__consumer_offsets`` today, ``__transaction_state`` next: a coordinator writes each partition
it owns through one fenced writer, whose interface is ``log``. Plain Python (no gRPC, no etcd):
the process (``strom_coordinator.offsets_log``) implements it. Nothing here knows about groups.
"""

"""How long this node may still acknowledge acks=all writes as a leader: its leader lease.

The controller moves a partition's leadership away from a node only once that node's etcd
session (its registration lease, ``broker.session.timeout.ms``) has expired. The node cannot
see the controller decide, but it can tell when the expiry became *possible*: a keep-alive
sent at time ``t`` and answered with TTL ``ttl`` keeps the session alive at least until
``t + ttl`` (etcd renews it on receipt, after ``t``). Past the latest such bound the node may
have been replaced, so it stops acknowledging acks=all writes (``NOT_LEADER_OR_FOLLOWER``)
until a keep-alive gets through again. acks=0/1 writes and reads are not covered: their
guarantee never depended on the ISR.

The bound itself is ``strom_server.etcd.session_lease`` (the coordinator uses it too).
"""

from __future__ import annotations

from strom.errors import NotLeaderOrFollowerError
from strom_server.etcd.session_lease import SessionLease

__all__ = ["LeaderLease"]


class LeaderLease(SessionLease):
    """The end of the current lease, renewed by every answered etcd keep-alive
    (``strom_server.etcd.session_lease``)."""

    def error(self, node_id: int, what: str) -> NotLeaderOrFollowerError:
        return NotLeaderOrFollowerError(
            f"node {node_id} {self.lapse()}: another node may lead {what} now, so it no longer "
            "acknowledges acks=all writes"
        )

"""Fixtures of the coordinator integration tests (defined in the testkits)."""

from cluster_testkit import cluster
from coordsvc_testkit import coordinated
from txn_rpc_testkit import gateway

__all__ = ["cluster", "coordinated", "gateway"]

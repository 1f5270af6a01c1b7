"""Fixtures of the gateway's transaction-routing tests (defined in the testkits)."""

from cluster_testkit import cluster
from txn_rpc_testkit import gateway

__all__ = ["cluster", "gateway"]

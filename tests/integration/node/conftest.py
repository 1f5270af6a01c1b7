"""Fixtures of the Node.js client tests (defined in cluster_testkit)."""

from cluster_testkit import cluster

__all__ = ["cluster"]

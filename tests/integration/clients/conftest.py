"""Fixtures of the client integration tests (defined in cluster_testkit)."""

from cluster_testkit import cluster

__all__ = ["cluster"]

"""Fixtures of the gateway data-path tests (defined in cluster_testkit)."""

from cluster_testkit import cluster

__all__ = ["cluster"]

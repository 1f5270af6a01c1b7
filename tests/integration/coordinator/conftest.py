"""Fixtures of the coordinator integration tests (defined in the testkits)."""

from cluster_testkit import cluster
from coordsvc_testkit import coordinated

__all__ = ["cluster", "coordinated"]

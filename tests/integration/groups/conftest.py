"""Fixtures of the consumer-group membership tests (defined in membership_testkit)."""

from membership_testkit import groups_cluster

__all__ = ["groups_cluster"]

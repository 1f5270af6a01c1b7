"""Fixtures of the gateway group-forwarding tests (defined in gateway_groups_testkit)."""

from gateway_groups_testkit import groups_cluster

__all__ = ["groups_cluster"]

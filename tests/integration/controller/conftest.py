"""Fixtures of the controller integration tests (defined in controller_testkit)."""

from controller_testkit import cluster, etcd_server

__all__ = ["cluster", "etcd_server"]

"""Fixtures of the admin integration tests (defined in admin_testkit)."""

from admin_testkit import cluster

__all__ = ["cluster"]

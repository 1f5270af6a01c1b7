"""Fixtures of the storage-node integration tests."""

from storage_testkit import start_node

__all__ = ["start_node"]

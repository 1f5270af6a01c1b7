"""Fixtures of the schema registry integration tests (defined in the testkit)."""

from registry_testkit import registries

__all__ = ["registries"]

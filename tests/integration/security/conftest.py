"""The security tests' cluster: a secure one (security_testkit)."""

from security_testkit import cluster

__all__ = ["cluster"]

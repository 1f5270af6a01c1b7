"""Exceptions as HTTP statuses: the one mapping of the HTTP services.

An exception carrying its own HTTP ``status`` (the registry's Confluent errors, the auth
layer's 401) keeps it; a ``strom.errors`` exception from a cluster call is 404 for what does
not exist, 400 for what the cluster refused as invalid (a bad setting included), 409 for a
group that must be empty first, a schema registry's own 4xx as it answered (else 502: the
registry behind the console failed), and 502 for every other cluster failure. Anything else
is 500.
"""

from __future__ import annotations

from strom import errors
from strom.errors import StromError
from strom.serde.registry_client import SchemaRegistryError

__all__ = ["status_for", "status_of"]

_NOT_FOUND = (
    errors.UnknownTopicOrPartitionError,
    errors.GroupIdNotFoundError,
    errors.TransactionalIdNotFoundError,
)
_REFUSED = (
    errors.ConfigurationError,
    errors.InvalidTopicError,
    errors.TopicAlreadyExistsError,
    errors.InvalidPartitionsError,
    errors.InvalidReplicationFactorError,
    errors.InvalidConfigError,
    errors.InvalidRequestError,
    errors.PolicyViolationError,
)


def status_for(exc: StromError) -> int:
    """The status of a failed cluster call (module docstring)."""
    if isinstance(exc, SchemaRegistryError):
        return exc.status if 400 <= exc.status < 500 else 502
    if isinstance(exc, errors.NonEmptyGroupError):
        return 409
    if isinstance(exc, _NOT_FOUND):
        return 404
    return 400 if isinstance(exc, _REFUSED) else 502


def status_of(exc: BaseException) -> int:
    """The HTTP status answering ``exc`` (module docstring)."""
    status = getattr(exc, "status", None)
    if isinstance(status, int) and 400 <= status < 600 and not isinstance(exc, StromError):
        return status
    if isinstance(exc, StromError):
        return status_for(exc)
    return 500

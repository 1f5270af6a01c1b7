"""How an exception escaping an RPC handler becomes a gRPC status: the one server-side boundary.

Responses report per-partition problems in their ``error_code`` fields; this mapping is for an
error that fails the whole request. The status carries the ``ErrorCode`` number in the trailing
metadata key ``strom-error-code`` so that clients can rebuild the exact ``strom.errors`` class
(``strom.errors.for_code``).

=============================================  ======================  ======================
exception                                      gRPC status             strom-error-code
=============================================  ======================  ======================
``BrokerResponseError``, retriable             UNAVAILABLE             its code
``BrokerResponseError``, request is malformed  INVALID_ARGUMENT        its code
  (``REQUEST_ERROR_CODES``: INVALID_REQUEST,
  MESSAGE_TOO_LARGE, INVALID_CONFIG, ...)
``UnknownServerError``                         INTERNAL                UNKNOWN_SERVER_ERROR
``AuthorizationFailedError`` (TOPIC_, GROUP_,    PERMISSION_DENIED       its code
  CLUSTER_, TRANSACTIONAL_ID_...)
``SaslAuthenticationFailedError``              UNAUTHENTICATED         its code
other ``BrokerResponseError`` (state: fenced,  FAILED_PRECONDITION     its code
  out of range, unknown member, ...)
``ConfigurationError``                         INVALID_ARGUMENT        INVALID_CONFIG
``StromTimeoutError``                          DEADLINE_EXCEEDED       REQUEST_TIMED_OUT
other ``StromError``                           UNAVAILABLE if          UNKNOWN_SERVER_ERROR
                                               retriable, else
                                               INTERNAL
anything else (a bug)                          INTERNAL, short text,   UNKNOWN_SERVER_ERROR
                                               traceback logged
=============================================  ======================  ======================
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import grpc
from google.protobuf.message import Message

from strom.errors import (
    ERROR_CODE_METADATA_KEY,
    BrokerResponseError,
    ConfigurationError,
    ErrorCode,
    StromError,
    StromTimeoutError,
)
from strom.protocol.v1 import common_pb2

__all__ = [
    "AUTHORIZATION_ERROR_CODES",
    "COORDINATOR_MOVING",
    "ERROR_CODE_KEY",
    "REQUEST_ERROR_CODES",
    "RpcStatus",
    "coordinator_moving",
    "error_fields",
    "status_for_exception",
]

ERROR_CODE_KEY = ERROR_CODE_METADATA_KEY
"""Trailing-metadata key holding the ``ErrorCode`` number of a failed request."""

REQUEST_ERROR_CODES: frozenset[int] = frozenset(
    {
        ErrorCode.INVALID_FETCH_SIZE,
        ErrorCode.MESSAGE_TOO_LARGE,
        ErrorCode.OFFSET_METADATA_TOO_LARGE,
        ErrorCode.INVALID_TOPIC_EXCEPTION,
        ErrorCode.RECORD_LIST_TOO_LARGE,
        ErrorCode.INVALID_REQUIRED_ACKS,
        ErrorCode.INVALID_GROUP_ID,
        ErrorCode.INVALID_SESSION_TIMEOUT,
        ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
        ErrorCode.INVALID_TIMESTAMP,
        ErrorCode.UNSUPPORTED_VERSION,
        ErrorCode.INVALID_PARTITIONS,
        ErrorCode.INVALID_REPLICATION_FACTOR,
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        ErrorCode.INVALID_CONFIG,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.POLICY_VIOLATION,
        ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
        ErrorCode.INVALID_RECORD,
    }
)
"""Non-retriable codes meaning "this request is wrong whatever the state": INVALID_ARGUMENT."""

AUTHORIZATION_ERROR_CODES: frozenset[int] = frozenset(
    {
        ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        ErrorCode.GROUP_AUTHORIZATION_FAILED,
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    }
)
"""The caller may not do this: PERMISSION_DENIED."""

COORDINATOR_MOVING: frozenset[int] = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
    }
)
"""A group or transaction coordinator's answers meaning "the key's coordinator is not there
right now": ask again, perhaps elsewhere (the gateway's router, the coordinators' calls to
each other)."""

_MAX_DETAILS = 1000


@dataclass(frozen=True)
class RpcStatus:
    """A gRPC status for a failed RPC, with the Strom error code for the trailer."""

    code: grpc.StatusCode
    details: str
    error_code: int
    unexpected: bool = False
    """True for exceptions outside ``strom.errors`` (bugs): log them with their traceback."""

    @property
    def trailing_metadata(self) -> tuple[tuple[str, str], ...]:
        return ((ERROR_CODE_KEY, str(self.error_code)),)


def _details(prefix: str, exc: BaseException) -> str:
    text = f"{prefix}: {exc}" if str(exc) else prefix
    return text if len(text) <= _MAX_DETAILS else text[: _MAX_DETAILS - 3] + "..."


def status_for_exception(exc: BaseException) -> RpcStatus:
    """The status an uncaught handler exception is reported with (see the module table)."""
    if isinstance(exc, BrokerResponseError):
        if exc.code == ErrorCode.UNKNOWN_SERVER_ERROR:
            status = grpc.StatusCode.INTERNAL
        elif exc.code in AUTHORIZATION_ERROR_CODES:
            status = grpc.StatusCode.PERMISSION_DENIED
        elif exc.code == ErrorCode.SASL_AUTHENTICATION_FAILED:
            status = grpc.StatusCode.UNAUTHENTICATED
        elif exc.retriable:
            status = grpc.StatusCode.UNAVAILABLE
        elif exc.code in REQUEST_ERROR_CODES:
            status = grpc.StatusCode.INVALID_ARGUMENT
        else:
            status = grpc.StatusCode.FAILED_PRECONDITION
        return RpcStatus(status, _details(exc.code_name, exc), exc.code)
    if isinstance(exc, ConfigurationError):
        return RpcStatus(
            grpc.StatusCode.INVALID_ARGUMENT,
            _details("INVALID_CONFIG", exc),
            ErrorCode.INVALID_CONFIG,
        )
    if isinstance(exc, StromTimeoutError):
        return RpcStatus(
            grpc.StatusCode.DEADLINE_EXCEEDED,
            _details("REQUEST_TIMED_OUT", exc),
            ErrorCode.REQUEST_TIMED_OUT,
        )
    if isinstance(exc, StromError):
        status = grpc.StatusCode.UNAVAILABLE if exc.retriable else grpc.StatusCode.INTERNAL
        return RpcStatus(status, _details(type(exc).__name__, exc), ErrorCode.UNKNOWN_SERVER_ERROR)
    return RpcStatus(
        grpc.StatusCode.INTERNAL,
        f"internal server error ({type(exc).__name__}); see the server log",
        ErrorCode.UNKNOWN_SERVER_ERROR,
        unexpected=True,
    )


def error_fields(error: BrokerResponseError | None) -> tuple[common_pb2.ErrorCode, str]:
    """A per-partition (or per-group, per-topic) error as a response's ``error_code`` and
    ``error_message`` fields: ``(NONE, "")`` for success. Every service fills its responses
    with this, so the message is the same whichever service reports the error: the server's
    explanation when there is one, else the error's description."""
    if error is None:
        return common_pb2.NONE, ""
    # An error's ``code`` is an ErrorCode number, which the protobuf stubs type as the enum class.
    return cast(common_pb2.ErrorCode, error.code), str(error)


def coordinator_moving(response: Message) -> int | None:
    """The first ``COORDINATOR_MOVING`` code of a coordinator's response, top level or in any
    item of a repeated field; None when it names none."""
    code = getattr(response, "error_code", 0)
    if code in COORDINATOR_MOVING:
        return int(code)
    for field, value in response.ListFields():
        if field.message_type is not None and field.is_repeated:
            for item in value:
                item_code = getattr(item, "error_code", 0)
                if item_code in COORDINATOR_MOVING:
                    return int(item_code)
    return None

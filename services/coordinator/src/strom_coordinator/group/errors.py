"""Request validation and the mapping of log-append failures to what group clients see."""

from __future__ import annotations

import structlog

from strom.errors import (
    BrokerResponseError,
    CoordinatorNotAvailableError,
    ErrorCode,
    InvalidCommitOffsetSizeError,
    InvalidGroupIdError,
    InvalidRequestError,
    NotCoordinatorError,
    StromError,
    UnknownServerError,
)

__all__ = ["MAX_ID_BYTES", "check_group_id", "check_id", "log_failure"]

log = structlog.get_logger(__name__)

#: Longest group, member, instance or client id accepted (UTF-8 bytes); the record format allows
#: 32767, a bound keeps hostile ids from bloating memory and every record of the group.
MAX_ID_BYTES = 1024

_RETRY_ELSEWHERE = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ErrorCode.REQUEST_TIMED_OUT,
}
_MOVED = {
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.NOT_COORDINATOR,
}
_TOO_LARGE = {
    ErrorCode.MESSAGE_TOO_LARGE,
    ErrorCode.RECORD_LIST_TOO_LARGE,
    ErrorCode.INVALID_FETCH_SIZE,
}


def check_group_id(group_id: str, *, allow_empty: bool = False) -> None:
    """INVALID_GROUP_ID for an empty (where not allowed) or overlong group id."""
    if not group_id and not allow_empty:
        raise InvalidGroupIdError("the group id must not be empty")
    if len(group_id.encode()) > MAX_ID_BYTES:
        raise InvalidGroupIdError(f"the group id is longer than {MAX_ID_BYTES} bytes")


def check_id(what: str, value: str | None) -> None:
    if value is not None and len(value.encode()) > MAX_ID_BYTES:
        raise InvalidRequestError(f"{what} is longer than {MAX_ID_BYTES} bytes")


def log_failure(error: BaseException, *, commit: bool) -> BrokerResponseError:
    """What a client sees when appending to __consumer_offsets failed (Kafka's mapping: storage
    trouble becomes COORDINATOR_NOT_AVAILABLE so clients retry, a lost partition
    NOT_COORDINATOR so they look the coordinator up again)."""
    what = f"writing to __consumer_offsets failed: {error}"
    if isinstance(error, BrokerResponseError):
        if error.code in _RETRY_ELSEWHERE:
            return CoordinatorNotAvailableError(what)
        if error.code in _MOVED:
            return NotCoordinatorError(what)
        if error.code in _TOO_LARGE:
            return InvalidCommitOffsetSizeError(what) if commit else UnknownServerError(what)
        return error
    if isinstance(error, StromError):
        return CoordinatorNotAvailableError(what)
    log.error("group_log_append_failed", error=repr(error))
    return UnknownServerError(f"writing to __consumer_offsets failed: {error!r}")

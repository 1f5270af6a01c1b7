"""The one exception tree of Strom, shared by clients and servers.

Every error a server reports on the wire has a stable numeric code from the ``ErrorCode`` enum
in ``proto/strom/protocol/v1/common.proto``; whether it is retriable is declared there too (the
``retriable`` enum-value option) and read from the generated descriptor here, so the flag is
written once. Each code has exactly one class below; ``for_code`` finds it.

::

    StromError                          base of everything Strom raises
    ├── ConfigurationError              a bad option or setting (names the option)
    ├── StromTimeoutError               a client-side wait ran out (flush, max_block_ms, ...)
    ├── SslHandshakeFailedError         no TLS session: one side speaks TLS and the other not,
    │                                   or the server's certificate is not trusted
    └── BrokerResponseError             a wire error code (code, retriable)
        ├── CorruptRecordError          CORRUPT_MESSAGE: a batch failed validation
        │   ├── InvalidCrcError             CRC-32C does not match
        │   ├── TruncatedBatchError         fewer bytes than the header promises
        │   ├── InvalidBatchLengthError     a length field out of range (too short or overlong)
        │   ├── UnsupportedMagicError       magic byte other than 2
        │   ├── RecordCountMismatchError    record count disagrees with the bytes
        │   ├── VarintOverflowError         a varint longer than its type allows
        │   └── InvalidRecordLayoutError    any other inconsistency inside a record
        ├── UnsupportedCompressionTypeError
        ├── NotLeaderOrFollowerError, OffsetOutOfRangeError, ... one class per ErrorCode
        └── UnknownServerError          UNKNOWN_SERVER_ERROR and codes this client does not know
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from strom.protocol.v1.common_pb2 import ErrorCode
from strom.protocol.v1.common_pb2 import retriable as _retriable_option

__all__ = [
    "ERROR_CODE_METADATA_KEY",
    "AuthorizationFailedError",
    "BrokerNotAvailableError",
    "BrokerResponseError",
    "ClusterAuthorizationFailedError",
    "ConcurrentTransactionsError",
    "ConfigurationError",
    "CoordinatorLoadInProgressError",
    "CoordinatorNotAvailableError",
    "CorruptRecordError",
    "DuplicateBrokerRegistrationError",
    "DuplicateSequenceNumberError",
    "ElectionNotNeededError",
    "EligibleLeadersNotAvailableError",
    "ErrorCode",
    "FencedInstanceIdError",
    "FencedLeaderEpochError",
    "FetchSessionIdNotFoundError",
    "GroupAuthorizationFailedError",
    "GroupIdNotFoundError",
    "GroupMaxSizeReachedError",
    "GroupSubscribedToTopicError",
    "IllegalGenerationError",
    "IllegalSaslStateError",
    "InconsistentGroupProtocolError",
    "InvalidBatchLengthError",
    "InvalidCommitOffsetSizeError",
    "InvalidConfigError",
    "InvalidCrcError",
    "InvalidFetchSizeError",
    "InvalidGroupIdError",
    "InvalidPartitionsError",
    "InvalidProducerEpochError",
    "InvalidProducerIdMappingError",
    "InvalidRecordError",
    "InvalidRecordLayoutError",
    "InvalidReplicaAssignmentError",
    "InvalidReplicationFactorError",
    "InvalidRequestError",
    "InvalidRequiredAcksError",
    "InvalidSessionTimeoutError",
    "InvalidTimestampError",
    "InvalidTopicError",
    "InvalidTransactionTimeoutError",
    "InvalidTxnStateError",
    "LeaderNotAvailableError",
    "LogDirNotFoundError",
    "MemberIdRequiredError",
    "MessageTooLargeError",
    "NetworkExceptionError",
    "NoReassignmentInProgressError",
    "NonEmptyGroupError",
    "NotControllerError",
    "NotCoordinatorError",
    "NotEnoughReplicasAfterAppendError",
    "NotEnoughReplicasError",
    "NotLeaderOrFollowerError",
    "OffsetMetadataTooLargeError",
    "OffsetNotAvailableError",
    "OffsetOutOfRangeError",
    "OperationNotAttemptedError",
    "OutOfOrderSequenceNumberError",
    "PolicyViolationError",
    "PreferredLeaderNotAvailableError",
    "ProducerFencedError",
    "ReassignmentInProgressError",
    "RebalanceInProgressError",
    "RecordCountMismatchError",
    "RecordListTooLargeError",
    "ReplicaNotAvailableError",
    "RequestTimedOutError",
    "SaslAuthenticationFailedError",
    "SslHandshakeFailedError",
    "StaleControllerEpochError",
    "StorageError",
    "StromError",
    "StromTimeoutError",
    "TopicAlreadyExistsError",
    "TopicAuthorizationFailedError",
    "TopicDeletionInProgressError",
    "TransactionAbortableError",
    "TransactionCoordinatorFencedError",
    "TransactionalIdAuthorizationFailedError",
    "TransactionalIdNotFoundError",
    "TruncatedBatchError",
    "UnknownLeaderEpochError",
    "UnknownMemberIdError",
    "UnknownProducerIdError",
    "UnknownServerError",
    "UnknownTopicOrPartitionError",
    "UnstableOffsetCommitError",
    "UnsupportedCompressionTypeError",
    "UnsupportedMagicError",
    "UnsupportedSaslMechanismError",
    "UnsupportedVersionError",
    "VarintOverflowError",
    "for_code",
    "is_retriable",
]


#: gRPC trailing-metadata key carrying the ErrorCode of a whole-request failure, so a client can
#: rebuild the exact ``strom.errors`` class from a gRPC status.
ERROR_CODE_METADATA_KEY = "strom-error-code"


def is_retriable(code: int) -> bool:
    """Whether ``code`` is marked retriable in the protocol definition."""
    value = ErrorCode.DESCRIPTOR.values_by_number.get(code)
    return bool(value is not None and value.GetOptions().Extensions[_retriable_option])


class StromError(Exception):
    """Base of every error Strom raises."""

    retriable: ClassVar[bool] = False


class ConfigurationError(StromError, ValueError):
    """A client option or server setting has an invalid name, type or value."""


class StromTimeoutError(StromError, TimeoutError):
    """A client-side wait ran out before the operation completed."""

    retriable = True


class SslHandshakeFailedError(StromError):
    """No TLS session with a server: it requires TLS and the client does not use it, it does
    not speak TLS and the client does, or its certificate is not trusted. A configuration
    problem, not retriable; the message names the server and the likely fix."""


class BrokerResponseError(StromError):
    """An error reported by a server with a protocol error code.

    ``code`` is the ``ErrorCode`` number, ``retriable`` says whether retrying may help. The
    message is the server's explanation when it sent one.
    """

    code: ClassVar[int] = ErrorCode.UNKNOWN_SERVER_ERROR

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        cls.retriable = is_retriable(cls.code)

    def __init__(self, message: str = "") -> None:
        super().__init__(message or self.__doc__ or ErrorCode.Name(self.code))
        self.message = message

    @property
    def code_name(self) -> str:
        return ErrorCode.Name(self.code)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code_name}: {self.args[0]!r})"


class UnknownServerError(BrokerResponseError):
    """The server failed in a way it could not classify."""

    code = ErrorCode.UNKNOWN_SERVER_ERROR


class OffsetOutOfRangeError(BrokerResponseError):
    """The requested offset is below the log start or above the log end."""

    code = ErrorCode.OFFSET_OUT_OF_RANGE


class CorruptRecordError(BrokerResponseError):
    """A record batch failed validation (CRC, length, magic or record layout)."""

    code = ErrorCode.CORRUPT_MESSAGE


class UnknownTopicOrPartitionError(BrokerResponseError):
    """This server does not host the topic or partition."""

    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


class InvalidFetchSizeError(BrokerResponseError):
    """The requested fetch size is invalid."""

    code = ErrorCode.INVALID_FETCH_SIZE


class LeaderNotAvailableError(BrokerResponseError):
    """The partition has no leader right now (an election is in progress)."""

    code = ErrorCode.LEADER_NOT_AVAILABLE


class NotLeaderOrFollowerError(BrokerResponseError):
    """This server is not the leader (or a follower) of the partition."""

    code = ErrorCode.NOT_LEADER_OR_FOLLOWER


class RequestTimedOutError(BrokerResponseError):
    """The request did not complete within its timeout."""

    code = ErrorCode.REQUEST_TIMED_OUT


class BrokerNotAvailableError(BrokerResponseError):
    """The broker is not available."""

    code = ErrorCode.BROKER_NOT_AVAILABLE


class ReplicaNotAvailableError(BrokerResponseError):
    """The replica is not available for the requested partition."""

    code = ErrorCode.REPLICA_NOT_AVAILABLE


class MessageTooLargeError(BrokerResponseError):
    """A batch is larger than max.message.bytes (or the request size limit)."""

    code = ErrorCode.MESSAGE_TOO_LARGE


class StaleControllerEpochError(BrokerResponseError):
    """The request came from a controller that is no longer active."""

    code = ErrorCode.STALE_CONTROLLER_EPOCH


class OffsetMetadataTooLargeError(BrokerResponseError):
    """The metadata string of an offset commit is too large."""

    code = ErrorCode.OFFSET_METADATA_TOO_LARGE


class NetworkExceptionError(BrokerResponseError):
    """The connection failed before a response arrived."""

    code = ErrorCode.NETWORK_EXCEPTION


class CoordinatorLoadInProgressError(BrokerResponseError):
    """The coordinator is still loading the group's state."""

    code = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS


class CoordinatorNotAvailableError(BrokerResponseError):
    """The group coordinator is not available."""

    code = ErrorCode.COORDINATOR_NOT_AVAILABLE


class NotCoordinatorError(BrokerResponseError):
    """This is not the coordinator of the group."""

    code = ErrorCode.NOT_COORDINATOR


class InvalidTopicError(BrokerResponseError):
    """The topic name is invalid, or the topic is internal and may not be written."""

    code = ErrorCode.INVALID_TOPIC_EXCEPTION


class RecordListTooLargeError(BrokerResponseError):
    """A produce request holds more data than the partition accepts at once."""

    code = ErrorCode.RECORD_LIST_TOO_LARGE


class NotEnoughReplicasError(BrokerResponseError):
    """The in-sync replica set is smaller than min.insync.replicas."""

    code = ErrorCode.NOT_ENOUGH_REPLICAS


class NotEnoughReplicasAfterAppendError(BrokerResponseError):
    """Appended, but the ISR shrank below min.insync.replicas before it was replicated."""

    code = ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND


class InvalidRequiredAcksError(BrokerResponseError):
    """acks is not one of 0, 1 or -1 (all)."""

    code = ErrorCode.INVALID_REQUIRED_ACKS


class IllegalGenerationError(BrokerResponseError):
    """The generation id is not the group's current one."""

    code = ErrorCode.ILLEGAL_GENERATION


class InconsistentGroupProtocolError(BrokerResponseError):
    """The member's protocol type or assignors do not match the group's."""

    code = ErrorCode.INCONSISTENT_GROUP_PROTOCOL


class InvalidGroupIdError(BrokerResponseError):
    """The group id is empty or invalid."""

    code = ErrorCode.INVALID_GROUP_ID


class UnknownMemberIdError(BrokerResponseError):
    """The coordinator does not know this member id."""

    code = ErrorCode.UNKNOWN_MEMBER_ID


class InvalidSessionTimeoutError(BrokerResponseError):
    """The session timeout is outside the broker's allowed range."""

    code = ErrorCode.INVALID_SESSION_TIMEOUT


class RebalanceInProgressError(BrokerResponseError):
    """The group is rebalancing; rejoin."""

    code = ErrorCode.REBALANCE_IN_PROGRESS


class InvalidCommitOffsetSizeError(BrokerResponseError):
    """The committed offset is invalid."""

    code = ErrorCode.INVALID_COMMIT_OFFSET_SIZE


class InvalidTimestampError(BrokerResponseError):
    """A timestamp is outside the accepted range."""

    code = ErrorCode.INVALID_TIMESTAMP


class UnsupportedVersionError(BrokerResponseError):
    """The request uses a protocol version this server does not support."""

    code = ErrorCode.UNSUPPORTED_VERSION


class TopicAlreadyExistsError(BrokerResponseError):
    """A topic with this name already exists."""

    code = ErrorCode.TOPIC_ALREADY_EXISTS


class InvalidPartitionsError(BrokerResponseError):
    """The partition count is invalid (for example, a decrease)."""

    code = ErrorCode.INVALID_PARTITIONS


class InvalidReplicationFactorError(BrokerResponseError):
    """The replication factor is invalid or larger than the live node count."""

    code = ErrorCode.INVALID_REPLICATION_FACTOR


class InvalidReplicaAssignmentError(BrokerResponseError):
    """The explicit replica assignment is invalid."""

    code = ErrorCode.INVALID_REPLICA_ASSIGNMENT


class InvalidConfigError(BrokerResponseError):
    """A configuration name, type or value is invalid."""

    code = ErrorCode.INVALID_CONFIG


class NotControllerError(BrokerResponseError):
    """This controller is not the active one; the message names the active one."""

    code = ErrorCode.NOT_CONTROLLER


class InvalidRequestError(BrokerResponseError):
    """The request is malformed or inconsistent."""

    code = ErrorCode.INVALID_REQUEST


class PolicyViolationError(BrokerResponseError):
    """The request violates a cluster policy."""

    code = ErrorCode.POLICY_VIOLATION


class OutOfOrderSequenceNumberError(BrokerResponseError):
    """The batch's sequence number leaves a gap after the last one written."""

    code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


class DuplicateSequenceNumberError(BrokerResponseError):
    """The batch's sequence number was already written."""

    code = ErrorCode.DUPLICATE_SEQUENCE_NUMBER


class InvalidProducerEpochError(BrokerResponseError):
    """The producer epoch is older than the current one: this producer was fenced."""

    code = ErrorCode.INVALID_PRODUCER_EPOCH


class InvalidTxnStateError(BrokerResponseError):
    """The transactional state does not allow this operation."""

    code = ErrorCode.INVALID_TXN_STATE


class InvalidProducerIdMappingError(BrokerResponseError):
    """The producer id is not mapped to the transactional id."""

    code = ErrorCode.INVALID_PRODUCER_ID_MAPPING


class InvalidTransactionTimeoutError(BrokerResponseError):
    """The transaction timeout is above the coordinator's transaction.max.timeout.ms (or not
    positive)."""

    code = ErrorCode.INVALID_TRANSACTION_TIMEOUT


class ConcurrentTransactionsError(BrokerResponseError):
    """Another transaction operation is in progress."""

    code = ErrorCode.CONCURRENT_TRANSACTIONS


class TransactionCoordinatorFencedError(BrokerResponseError):
    """A newer owner of the transaction's state partition exists: this coordinator is fenced."""

    code = ErrorCode.TRANSACTION_COORDINATOR_FENCED


class StorageError(BrokerResponseError):
    """A disk error on the server; the log directory is offline."""

    code = ErrorCode.KAFKA_STORAGE_ERROR


class LogDirNotFoundError(BrokerResponseError):
    """The requested log directory does not exist."""

    code = ErrorCode.LOG_DIR_NOT_FOUND


class UnknownProducerIdError(BrokerResponseError):
    """The server has no state for this producer id."""

    code = ErrorCode.UNKNOWN_PRODUCER_ID


class ReassignmentInProgressError(BrokerResponseError):
    """A reassignment of the partition is already in progress."""

    code = ErrorCode.REASSIGNMENT_IN_PROGRESS


class NonEmptyGroupError(BrokerResponseError):
    """The group still has members."""

    code = ErrorCode.NON_EMPTY_GROUP


class GroupIdNotFoundError(BrokerResponseError):
    """The group does not exist."""

    code = ErrorCode.GROUP_ID_NOT_FOUND


class FetchSessionIdNotFoundError(BrokerResponseError):
    """The fetch session is unknown."""

    code = ErrorCode.FETCH_SESSION_ID_NOT_FOUND


class FencedLeaderEpochError(BrokerResponseError):
    """The request's leader epoch is older than the partition's."""

    code = ErrorCode.FENCED_LEADER_EPOCH


class UnknownLeaderEpochError(BrokerResponseError):
    """The request's leader epoch is newer than this replica knows."""

    code = ErrorCode.UNKNOWN_LEADER_EPOCH


class UnsupportedCompressionTypeError(BrokerResponseError):
    """The batch uses a compression codec this server does not support."""

    code = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


class OffsetNotAvailableError(BrokerResponseError):
    """The leader's high watermark is not yet known after an election."""

    code = ErrorCode.OFFSET_NOT_AVAILABLE


class MemberIdRequiredError(BrokerResponseError):
    """The member must rejoin with the member id the coordinator assigned."""

    code = ErrorCode.MEMBER_ID_REQUIRED


class PreferredLeaderNotAvailableError(BrokerResponseError):
    """The preferred leader is not available."""

    code = ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE


class GroupMaxSizeReachedError(BrokerResponseError):
    """The group is at its maximum size."""

    code = ErrorCode.GROUP_MAX_SIZE_REACHED


class FencedInstanceIdError(BrokerResponseError):
    """Another member with the same group instance id replaced this one."""

    code = ErrorCode.FENCED_INSTANCE_ID


class EligibleLeadersNotAvailableError(BrokerResponseError):
    """No eligible replica can lead the partition."""

    code = ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE


class ElectionNotNeededError(BrokerResponseError):
    """The preferred leader already leads the partition."""

    code = ErrorCode.ELECTION_NOT_NEEDED


class NoReassignmentInProgressError(BrokerResponseError):
    """No reassignment is in progress for the partition."""

    code = ErrorCode.NO_REASSIGNMENT_IN_PROGRESS


class GroupSubscribedToTopicError(BrokerResponseError):
    """The group still consumes the topic."""

    code = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC


class InvalidRecordError(BrokerResponseError):
    """A record failed the server's validation."""

    code = ErrorCode.INVALID_RECORD


class UnstableOffsetCommitError(BrokerResponseError):
    """An offset commit for the partition is pending."""

    code = ErrorCode.UNSTABLE_OFFSET_COMMIT


class ProducerFencedError(BrokerResponseError):
    """A newer producer with the same transactional id exists: this one is fenced (fatal)."""

    code = ErrorCode.PRODUCER_FENCED


class TransactionalIdNotFoundError(BrokerResponseError):
    """The transaction coordinator has no state for this transactional id."""

    code = ErrorCode.TRANSACTIONAL_ID_NOT_FOUND


class TransactionAbortableError(BrokerResponseError):
    """The transaction cannot complete: abort it, then begin a new one."""

    code = ErrorCode.TRANSACTION_ABORTABLE


class OperationNotAttemptedError(BrokerResponseError):
    """Not done because another entry of the same request failed (the request did nothing)."""

    code = ErrorCode.OPERATION_NOT_ATTEMPTED


class DuplicateBrokerRegistrationError(BrokerResponseError):
    """A node with this id is already registered."""

    code = ErrorCode.DUPLICATE_BROKER_REGISTRATION


class TopicDeletionInProgressError(BrokerResponseError):
    """The topic is being deleted."""

    code = ErrorCode.TOPIC_DELETION_IN_PROGRESS


# Record-format rejections: all CORRUPT_MESSAGE on the wire, distinct types for callers and tests.


class InvalidCrcError(CorruptRecordError):
    """The batch's CRC-32C does not match its contents."""


class TruncatedBatchError(CorruptRecordError):
    """The buffer ends before the batch (or a record inside it) does."""


class InvalidBatchLengthError(CorruptRecordError):
    """A batch or record length field is out of range (shorter than its header, or overlong)."""


class UnsupportedMagicError(CorruptRecordError):
    """The batch's magic byte is not 2 (Kafka's v2 record batch)."""


class RecordCountMismatchError(CorruptRecordError):
    """The batch's record count disagrees with the records its bytes hold."""


class VarintOverflowError(CorruptRecordError):
    """A varint is longer than its type allows (5 bytes for 32 bits, 10 for 64)."""


class InvalidRecordLayoutError(CorruptRecordError):
    """A record's fields are inconsistent (negative length, trailing bytes, bad offset delta)."""


class AuthorizationFailedError(BrokerResponseError):
    """Base of the authorization failures: the caller may not do this (docs/security.md)."""


class TopicAuthorizationFailedError(AuthorizationFailedError):
    """The caller is not authorized for this operation on the topic. ``unauthorized_topics``
    names the topics refused, when known (Kafka's ``unauthorizedTopics()``)."""

    code = ErrorCode.TOPIC_AUTHORIZATION_FAILED

    def __init__(self, message: str = "", unauthorized_topics: Iterable[str] = ()) -> None:
        super().__init__(message)
        self.unauthorized_topics = frozenset(unauthorized_topics)


class GroupAuthorizationFailedError(AuthorizationFailedError):
    """The caller is not authorized for this operation on the group."""

    code = ErrorCode.GROUP_AUTHORIZATION_FAILED


class ClusterAuthorizationFailedError(AuthorizationFailedError):
    """The caller is not authorized for this operation on the cluster."""

    code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED


class TransactionalIdAuthorizationFailedError(AuthorizationFailedError):
    """The caller is not authorized for this operation on the transactional id."""

    code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


class UnsupportedSaslMechanismError(BrokerResponseError):
    """The server does not support the requested SASL mechanism."""

    code = ErrorCode.UNSUPPORTED_SASL_MECHANISM


class IllegalSaslStateError(BrokerResponseError):
    """A SASL message arrived out of order (unknown or expired exchange)."""

    code = ErrorCode.ILLEGAL_SASL_STATE


class SaslAuthenticationFailedError(BrokerResponseError):
    """Authentication failed: wrong credentials, or a missing, expired or forged token."""

    code = ErrorCode.SASL_AUTHENTICATION_FAILED


def _collect_codes() -> dict[int, type[BrokerResponseError]]:
    table: dict[int, type[BrokerResponseError]] = {}
    pending: list[type[BrokerResponseError]] = [BrokerResponseError]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        # The first class declaring a code owns it; subclasses refine it (CorruptRecordError's).
        if cls is not BrokerResponseError and "code" in cls.__dict__:
            table.setdefault(cls.code, cls)
    return table


_BY_CODE = _collect_codes()


def for_code(code: int, message: str = "") -> BrokerResponseError:
    """The exception for a wire error ``code``; unknown codes become ``UnknownServerError``."""
    cls = _BY_CODE.get(code)
    if cls is None:
        return UnknownServerError(
            f"error code {code}: {message}" if message else f"error code {code}"
        )
    return cls(message)

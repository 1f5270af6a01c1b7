from google.protobuf import descriptor_pb2 as _descriptor_pb2
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ErrorCode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NONE: _ClassVar[ErrorCode]
    UNKNOWN_SERVER_ERROR: _ClassVar[ErrorCode]
    OFFSET_OUT_OF_RANGE: _ClassVar[ErrorCode]
    CORRUPT_MESSAGE: _ClassVar[ErrorCode]
    UNKNOWN_TOPIC_OR_PARTITION: _ClassVar[ErrorCode]
    INVALID_FETCH_SIZE: _ClassVar[ErrorCode]
    LEADER_NOT_AVAILABLE: _ClassVar[ErrorCode]
    NOT_LEADER_OR_FOLLOWER: _ClassVar[ErrorCode]
    REQUEST_TIMED_OUT: _ClassVar[ErrorCode]
    BROKER_NOT_AVAILABLE: _ClassVar[ErrorCode]
    REPLICA_NOT_AVAILABLE: _ClassVar[ErrorCode]
    MESSAGE_TOO_LARGE: _ClassVar[ErrorCode]
    STALE_CONTROLLER_EPOCH: _ClassVar[ErrorCode]
    OFFSET_METADATA_TOO_LARGE: _ClassVar[ErrorCode]
    NETWORK_EXCEPTION: _ClassVar[ErrorCode]
    COORDINATOR_LOAD_IN_PROGRESS: _ClassVar[ErrorCode]
    COORDINATOR_NOT_AVAILABLE: _ClassVar[ErrorCode]
    NOT_COORDINATOR: _ClassVar[ErrorCode]
    INVALID_TOPIC_EXCEPTION: _ClassVar[ErrorCode]
    RECORD_LIST_TOO_LARGE: _ClassVar[ErrorCode]
    NOT_ENOUGH_REPLICAS: _ClassVar[ErrorCode]
    NOT_ENOUGH_REPLICAS_AFTER_APPEND: _ClassVar[ErrorCode]
    INVALID_REQUIRED_ACKS: _ClassVar[ErrorCode]
    ILLEGAL_GENERATION: _ClassVar[ErrorCode]
    INCONSISTENT_GROUP_PROTOCOL: _ClassVar[ErrorCode]
    INVALID_GROUP_ID: _ClassVar[ErrorCode]
    UNKNOWN_MEMBER_ID: _ClassVar[ErrorCode]
    INVALID_SESSION_TIMEOUT: _ClassVar[ErrorCode]
    REBALANCE_IN_PROGRESS: _ClassVar[ErrorCode]
    INVALID_COMMIT_OFFSET_SIZE: _ClassVar[ErrorCode]
    TOPIC_AUTHORIZATION_FAILED: _ClassVar[ErrorCode]
    GROUP_AUTHORIZATION_FAILED: _ClassVar[ErrorCode]
    CLUSTER_AUTHORIZATION_FAILED: _ClassVar[ErrorCode]
    INVALID_TIMESTAMP: _ClassVar[ErrorCode]
    UNSUPPORTED_SASL_MECHANISM: _ClassVar[ErrorCode]
    ILLEGAL_SASL_STATE: _ClassVar[ErrorCode]
    UNSUPPORTED_VERSION: _ClassVar[ErrorCode]
    TOPIC_ALREADY_EXISTS: _ClassVar[ErrorCode]
    INVALID_PARTITIONS: _ClassVar[ErrorCode]
    INVALID_REPLICATION_FACTOR: _ClassVar[ErrorCode]
    INVALID_REPLICA_ASSIGNMENT: _ClassVar[ErrorCode]
    INVALID_CONFIG: _ClassVar[ErrorCode]
    NOT_CONTROLLER: _ClassVar[ErrorCode]
    INVALID_REQUEST: _ClassVar[ErrorCode]
    POLICY_VIOLATION: _ClassVar[ErrorCode]
    OUT_OF_ORDER_SEQUENCE_NUMBER: _ClassVar[ErrorCode]
    DUPLICATE_SEQUENCE_NUMBER: _ClassVar[ErrorCode]
    INVALID_PRODUCER_EPOCH: _ClassVar[ErrorCode]
    INVALID_TXN_STATE: _ClassVar[ErrorCode]
    INVALID_PRODUCER_ID_MAPPING: _ClassVar[ErrorCode]
    INVALID_TRANSACTION_TIMEOUT: _ClassVar[ErrorCode]
    CONCURRENT_TRANSACTIONS: _ClassVar[ErrorCode]
    TRANSACTION_COORDINATOR_FENCED: _ClassVar[ErrorCode]
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED: _ClassVar[ErrorCode]
    OPERATION_NOT_ATTEMPTED: _ClassVar[ErrorCode]
    KAFKA_STORAGE_ERROR: _ClassVar[ErrorCode]
    LOG_DIR_NOT_FOUND: _ClassVar[ErrorCode]
    SASL_AUTHENTICATION_FAILED: _ClassVar[ErrorCode]
    UNKNOWN_PRODUCER_ID: _ClassVar[ErrorCode]
    REASSIGNMENT_IN_PROGRESS: _ClassVar[ErrorCode]
    NON_EMPTY_GROUP: _ClassVar[ErrorCode]
    GROUP_ID_NOT_FOUND: _ClassVar[ErrorCode]
    FETCH_SESSION_ID_NOT_FOUND: _ClassVar[ErrorCode]
    FENCED_LEADER_EPOCH: _ClassVar[ErrorCode]
    UNKNOWN_LEADER_EPOCH: _ClassVar[ErrorCode]
    UNSUPPORTED_COMPRESSION_TYPE: _ClassVar[ErrorCode]
    OFFSET_NOT_AVAILABLE: _ClassVar[ErrorCode]
    MEMBER_ID_REQUIRED: _ClassVar[ErrorCode]
    PREFERRED_LEADER_NOT_AVAILABLE: _ClassVar[ErrorCode]
    GROUP_MAX_SIZE_REACHED: _ClassVar[ErrorCode]
    FENCED_INSTANCE_ID: _ClassVar[ErrorCode]
    ELIGIBLE_LEADERS_NOT_AVAILABLE: _ClassVar[ErrorCode]
    ELECTION_NOT_NEEDED: _ClassVar[ErrorCode]
    NO_REASSIGNMENT_IN_PROGRESS: _ClassVar[ErrorCode]
    GROUP_SUBSCRIBED_TO_TOPIC: _ClassVar[ErrorCode]
    INVALID_RECORD: _ClassVar[ErrorCode]
    UNSTABLE_OFFSET_COMMIT: _ClassVar[ErrorCode]
    PRODUCER_FENCED: _ClassVar[ErrorCode]
    TRANSACTIONAL_ID_NOT_FOUND: _ClassVar[ErrorCode]
    TRANSACTION_ABORTABLE: _ClassVar[ErrorCode]
    DUPLICATE_BROKER_REGISTRATION: _ClassVar[ErrorCode]
    TOPIC_DELETION_IN_PROGRESS: _ClassVar[ErrorCode]

class OffsetSpec(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OFFSET_SPEC_UNSPECIFIED: _ClassVar[OffsetSpec]
    EARLIEST: _ClassVar[OffsetSpec]
    LATEST: _ClassVar[OffsetSpec]
    TIMESTAMP: _ClassVar[OffsetSpec]
    MAX_TIMESTAMP: _ClassVar[OffsetSpec]

class IsolationLevel(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    READ_UNCOMMITTED: _ClassVar[IsolationLevel]
    READ_COMMITTED: _ClassVar[IsolationLevel]
NONE: ErrorCode
UNKNOWN_SERVER_ERROR: ErrorCode
OFFSET_OUT_OF_RANGE: ErrorCode
CORRUPT_MESSAGE: ErrorCode
UNKNOWN_TOPIC_OR_PARTITION: ErrorCode
INVALID_FETCH_SIZE: ErrorCode
LEADER_NOT_AVAILABLE: ErrorCode
NOT_LEADER_OR_FOLLOWER: ErrorCode
REQUEST_TIMED_OUT: ErrorCode
BROKER_NOT_AVAILABLE: ErrorCode
REPLICA_NOT_AVAILABLE: ErrorCode
MESSAGE_TOO_LARGE: ErrorCode
STALE_CONTROLLER_EPOCH: ErrorCode
OFFSET_METADATA_TOO_LARGE: ErrorCode
NETWORK_EXCEPTION: ErrorCode
COORDINATOR_LOAD_IN_PROGRESS: ErrorCode
COORDINATOR_NOT_AVAILABLE: ErrorCode
NOT_COORDINATOR: ErrorCode
INVALID_TOPIC_EXCEPTION: ErrorCode
RECORD_LIST_TOO_LARGE: ErrorCode
NOT_ENOUGH_REPLICAS: ErrorCode
NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode
INVALID_REQUIRED_ACKS: ErrorCode
ILLEGAL_GENERATION: ErrorCode
INCONSISTENT_GROUP_PROTOCOL: ErrorCode
INVALID_GROUP_ID: ErrorCode
UNKNOWN_MEMBER_ID: ErrorCode
INVALID_SESSION_TIMEOUT: ErrorCode
REBALANCE_IN_PROGRESS: ErrorCode
INVALID_COMMIT_OFFSET_SIZE: ErrorCode
TOPIC_AUTHORIZATION_FAILED: ErrorCode
GROUP_AUTHORIZATION_FAILED: ErrorCode
CLUSTER_AUTHORIZATION_FAILED: ErrorCode
INVALID_TIMESTAMP: ErrorCode
UNSUPPORTED_SASL_MECHANISM: ErrorCode
ILLEGAL_SASL_STATE: ErrorCode
UNSUPPORTED_VERSION: ErrorCode
TOPIC_ALREADY_EXISTS: ErrorCode
INVALID_PARTITIONS: ErrorCode
INVALID_REPLICATION_FACTOR: ErrorCode
INVALID_REPLICA_ASSIGNMENT: ErrorCode
INVALID_CONFIG: ErrorCode
NOT_CONTROLLER: ErrorCode
INVALID_REQUEST: ErrorCode
POLICY_VIOLATION: ErrorCode
OUT_OF_ORDER_SEQUENCE_NUMBER: ErrorCode
DUPLICATE_SEQUENCE_NUMBER: ErrorCode
INVALID_PRODUCER_EPOCH: ErrorCode
INVALID_TXN_STATE: ErrorCode
INVALID_PRODUCER_ID_MAPPING: ErrorCode
INVALID_TRANSACTION_TIMEOUT: ErrorCode
CONCURRENT_TRANSACTIONS: ErrorCode
TRANSACTION_COORDINATOR_FENCED: ErrorCode
TRANSACTIONAL_ID_AUTHORIZATION_FAILED: ErrorCode
OPERATION_NOT_ATTEMPTED: ErrorCode
KAFKA_STORAGE_ERROR: ErrorCode
LOG_DIR_NOT_FOUND: ErrorCode
SASL_AUTHENTICATION_FAILED: ErrorCode
UNKNOWN_PRODUCER_ID: ErrorCode
REASSIGNMENT_IN_PROGRESS: ErrorCode
NON_EMPTY_GROUP: ErrorCode
GROUP_ID_NOT_FOUND: ErrorCode
FETCH_SESSION_ID_NOT_FOUND: ErrorCode
FENCED_LEADER_EPOCH: ErrorCode
UNKNOWN_LEADER_EPOCH: ErrorCode
UNSUPPORTED_COMPRESSION_TYPE: ErrorCode
OFFSET_NOT_AVAILABLE: ErrorCode
MEMBER_ID_REQUIRED: ErrorCode
PREFERRED_LEADER_NOT_AVAILABLE: ErrorCode
GROUP_MAX_SIZE_REACHED: ErrorCode
FENCED_INSTANCE_ID: ErrorCode
ELIGIBLE_LEADERS_NOT_AVAILABLE: ErrorCode
ELECTION_NOT_NEEDED: ErrorCode
NO_REASSIGNMENT_IN_PROGRESS: ErrorCode
GROUP_SUBSCRIBED_TO_TOPIC: ErrorCode
INVALID_RECORD: ErrorCode
UNSTABLE_OFFSET_COMMIT: ErrorCode
PRODUCER_FENCED: ErrorCode
TRANSACTIONAL_ID_NOT_FOUND: ErrorCode
TRANSACTION_ABORTABLE: ErrorCode
DUPLICATE_BROKER_REGISTRATION: ErrorCode
TOPIC_DELETION_IN_PROGRESS: ErrorCode
OFFSET_SPEC_UNSPECIFIED: OffsetSpec
EARLIEST: OffsetSpec
LATEST: OffsetSpec
TIMESTAMP: OffsetSpec
MAX_TIMESTAMP: OffsetSpec
READ_UNCOMMITTED: IsolationLevel
READ_COMMITTED: IsolationLevel
RETRIABLE_FIELD_NUMBER: _ClassVar[int]
retriable: _descriptor.FieldDescriptor

class Node(_message.Message):
    __slots__ = ("node_id", "host", "port", "rack")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    RACK_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    host: str
    port: int
    rack: str
    def __init__(self, node_id: _Optional[int] = ..., host: _Optional[str] = ..., port: _Optional[int] = ..., rack: _Optional[str] = ...) -> None: ...

class TopicPartition(_message.Message):
    __slots__ = ("topic", "partition")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ...) -> None: ...

class ConfigEntry(_message.Message):
    __slots__ = ("name", "value", "source", "read_only", "sensitive")
    class Source(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        SOURCE_UNKNOWN: _ClassVar[ConfigEntry.Source]
        DEFAULT: _ClassVar[ConfigEntry.Source]
        BROKER_DEFAULT: _ClassVar[ConfigEntry.Source]
        TOPIC: _ClassVar[ConfigEntry.Source]
    SOURCE_UNKNOWN: ConfigEntry.Source
    DEFAULT: ConfigEntry.Source
    BROKER_DEFAULT: ConfigEntry.Source
    TOPIC: ConfigEntry.Source
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    READ_ONLY_FIELD_NUMBER: _ClassVar[int]
    SENSITIVE_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: str
    source: ConfigEntry.Source
    read_only: bool
    sensitive: bool
    def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ..., source: _Optional[_Union[ConfigEntry.Source, str]] = ..., read_only: _Optional[bool] = ..., sensitive: _Optional[bool] = ...) -> None: ...

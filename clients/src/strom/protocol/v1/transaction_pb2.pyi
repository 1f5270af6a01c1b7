from strom.protocol.v1 import common_pb2 as _common_pb2
from strom.protocol.v1 import controller_pb2 as _controller_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AddPartitionsToTxnRequest(_message.Message):
    __slots__ = ("transactional_id", "producer_id", "producer_epoch", "partitions", "verify_only")
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    VERIFY_ONLY_FIELD_NUMBER: _ClassVar[int]
    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: _containers.RepeatedCompositeFieldContainer[_common_pb2.TopicPartition]
    verify_only: bool
    def __init__(self, transactional_id: _Optional[str] = ..., producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ..., partitions: _Optional[_Iterable[_Union[_common_pb2.TopicPartition, _Mapping]]] = ..., verify_only: _Optional[bool] = ...) -> None: ...

class AddPartitionsToTxnResult(_message.Message):
    __slots__ = ("topic", "partition", "error_code", "error_message")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    error_code: _common_pb2.ErrorCode
    error_message: str
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., error_code: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ...) -> None: ...

class AddPartitionsToTxnResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "results")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    error_code: _common_pb2.ErrorCode
    error_message: str
    results: _containers.RepeatedCompositeFieldContainer[AddPartitionsToTxnResult]
    def __init__(self, error_code: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., results: _Optional[_Iterable[_Union[AddPartitionsToTxnResult, _Mapping]]] = ...) -> None: ...

class AddOffsetsToTxnRequest(_message.Message):
    __slots__ = ("transactional_id", "producer_id", "producer_epoch", "group_id")
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    transactional_id: str
    producer_id: int
    producer_epoch: int
    group_id: str
    def __init__(self, transactional_id: _Optional[str] = ..., producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ..., group_id: _Optional[str] = ...) -> None: ...

class AddOffsetsToTxnResponse(_message.Message):
    __slots__ = ("error_code", "error_message")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    error_code: _common_pb2.ErrorCode
    error_message: str
    def __init__(self, error_code: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ...) -> None: ...

class EndTxnRequest(_message.Message):
    __slots__ = ("transactional_id", "producer_id", "producer_epoch", "committed", "keep_epoch")
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_FIELD_NUMBER: _ClassVar[int]
    KEEP_EPOCH_FIELD_NUMBER: _ClassVar[int]
    transactional_id: str
    producer_id: int
    producer_epoch: int
    committed: bool
    keep_epoch: bool
    def __init__(self, transactional_id: _Optional[str] = ..., producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ..., committed: _Optional[bool] = ..., keep_epoch: _Optional[bool] = ...) -> None: ...

class EndTxnResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "producer_id", "producer_epoch")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    error_code: _common_pb2.ErrorCode
    error_message: str
    producer_id: int
    producer_epoch: int
    def __init__(self, error_code: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ...) -> None: ...

class ListTransactionsRequest(_message.Message):
    __slots__ = ("state_filters", "producer_id_filters", "duration_filter_ms", "transactional_id_prefix")
    STATE_FILTERS_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FILTERS_FIELD_NUMBER: _ClassVar[int]
    DURATION_FILTER_MS_FIELD_NUMBER: _ClassVar[int]
    TRANSACTIONAL_ID_PREFIX_FIELD_NUMBER: _ClassVar[int]
    state_filters: _containers.RepeatedScalarFieldContainer[str]
    producer_id_filters: _containers.RepeatedScalarFieldContainer[int]
    duration_filter_ms: int
    transactional_id_prefix: str
    def __init__(self, state_filters: _Optional[_Iterable[str]] = ..., producer_id_filters: _Optional[_Iterable[int]] = ..., duration_filter_ms: _Optional[int] = ..., transactional_id_prefix: _Optional[str] = ...) -> None: ...

class ListedTransaction(_message.Message):
    __slots__ = ("transactional_id", "producer_id", "state")
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    transactional_id: str
    producer_id: int
    state: str
    def __init__(self, transactional_id: _Optional[str] = ..., producer_id: _Optional[int] = ..., state: _Optional[str] = ...) -> None: ...

class ListTransactionsResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "transactions", "unreachable_coordinators")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TRANSACTIONS_FIELD_NUMBER: _ClassVar[int]
    UNREACHABLE_COORDINATORS_FIELD_NUMBER: _ClassVar[int]
    error_code: _common_pb2.ErrorCode
    error_message: str
    transactions: _containers.RepeatedCompositeFieldContainer[ListedTransaction]
    unreachable_coordinators: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, error_code: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., transactions: _Optional[_Iterable[_Union[ListedTransaction, _Mapping]]] = ..., unreachable_coordinators: _Optional[_Iterable[int]] = ...) -> None: ...

class DescribeTransactionsRequest(_message.Message):
    __slots__ = ("transactional_ids",)
    TRANSACTIONAL_IDS_FIELD_NUMBER: _ClassVar[int]
    transactional_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, transactional_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class DescribedTransaction(_message.Message):
    __slots__ = ("error_code", "error_message", "transactional_id", "state", "transaction_timeout_ms", "transaction_start_time_ms", "producer_id", "producer_epoch", "partitions", "group_ids", "coordinator_id")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_START_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    GROUP_IDS_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_ID_FIELD_NUMBER: _ClassVar[int]
    error_code: _common_pb2.ErrorCode
    error_message: str
    transactional_id: str
    state: str
    transaction_timeout_ms: int
    transaction_start_time_ms: int
    producer_id: int
    producer_epoch: int
    partitions: _containers.RepeatedCompositeFieldContainer[_common_pb2.TopicPartition]
    group_ids: _containers.RepeatedScalarFieldContainer[str]
    coordinator_id: int
    def __init__(self, error_code: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., transactional_id: _Optional[str] = ..., state: _Optional[str] = ..., transaction_timeout_ms: _Optional[int] = ..., transaction_start_time_ms: _Optional[int] = ..., producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ..., partitions: _Optional[_Iterable[_Union[_common_pb2.TopicPartition, _Mapping]]] = ..., group_ids: _Optional[_Iterable[str]] = ..., coordinator_id: _Optional[int] = ...) -> None: ...

class DescribeTransactionsResponse(_message.Message):
    __slots__ = ("transactions",)
    TRANSACTIONS_FIELD_NUMBER: _ClassVar[int]
    transactions: _containers.RepeatedCompositeFieldContainer[DescribedTransaction]
    def __init__(self, transactions: _Optional[_Iterable[_Union[DescribedTransaction, _Mapping]]] = ...) -> None: ...

class StagedTransaction(_message.Message):
    __slots__ = ("transactional_id", "producer_id", "producer_epoch")
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    transactional_id: str
    producer_id: int
    producer_epoch: int
    def __init__(self, transactional_id: _Optional[str] = ..., producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ...) -> None: ...

class StagedCommit(_message.Message):
    __slots__ = ("commit_id", "sequence", "state", "members", "metadata", "failed_members", "last_update_ms")
    COMMIT_ID_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    FAILED_MEMBERS_FIELD_NUMBER: _ClassVar[int]
    LAST_UPDATE_MS_FIELD_NUMBER: _ClassVar[int]
    commit_id: str
    sequence: int
    state: str
    members: _containers.RepeatedCompositeFieldContainer[StagedTransaction]
    metadata: bytes
    failed_members: _containers.RepeatedCompositeFieldContainer[StagedTransaction]
    last_update_ms: int
    def __init__(self, commit_id: _Optional[str] = ..., sequence: _Optional[int] = ..., state: _Optional[str] = ..., members: _Optional[_Iterable[_Union[StagedTransaction, _Mapping]]] = ..., metadata: _Optional[bytes] = ..., failed_members: _Optional[_Iterable[_Union[StagedTransaction, _Mapping]]] = ..., last_update_ms: _Optional[int] = ...) -> None: ...

class CommitStagedTransactionsRequest(_message.Message):
    __slots__ = ("commit_id", "sequence", "members", "metadata")
    COMMIT_ID_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    commit_id: str
    sequence: int
    members: _containers.RepeatedCompositeFieldContainer[StagedTransaction]
    metadata: bytes
    def __init__(self, commit_id: _Optional[str] = ..., sequence: _Optional[int] = ..., members: _Optional[_Iterable[_Union[StagedTransaction, _Mapping]]] = ..., metadata: _Optional[bytes] = ...) -> None: ...

class CommitStagedTransactionsResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "already_committed", "commit")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ALREADY_COMMITTED_FIELD_NUMBER: _ClassVar[int]
    COMMIT_FIELD_NUMBER: _ClassVar[int]
    error_code: _common_pb2.ErrorCode
    error_message: str
    already_committed: bool
    commit: StagedCommit
    def __init__(self, error_code: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., already_committed: _Optional[bool] = ..., commit: _Optional[_Union[StagedCommit, _Mapping]] = ...) -> None: ...

class DescribeStagedCommitRequest(_message.Message):
    __slots__ = ("commit_id",)
    COMMIT_ID_FIELD_NUMBER: _ClassVar[int]
    commit_id: str
    def __init__(self, commit_id: _Optional[str] = ...) -> None: ...

class DescribeStagedCommitResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "found", "commit")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    FOUND_FIELD_NUMBER: _ClassVar[int]
    COMMIT_FIELD_NUMBER: _ClassVar[int]
    error_code: _common_pb2.ErrorCode
    error_message: str
    found: bool
    commit: StagedCommit
    def __init__(self, error_code: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., found: _Optional[bool] = ..., commit: _Optional[_Union[StagedCommit, _Mapping]] = ...) -> None: ...

class WriteTxnMarker(_message.Message):
    __slots__ = ("producer_id", "producer_epoch", "committed", "coordinator_epoch", "partitions", "group_ids", "transactional_id")
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    GROUP_IDS_FIELD_NUMBER: _ClassVar[int]
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    producer_id: int
    producer_epoch: int
    committed: bool
    coordinator_epoch: int
    partitions: _containers.RepeatedCompositeFieldContainer[_common_pb2.TopicPartition]
    group_ids: _containers.RepeatedScalarFieldContainer[str]
    transactional_id: str
    def __init__(self, producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ..., committed: _Optional[bool] = ..., coordinator_epoch: _Optional[int] = ..., partitions: _Optional[_Iterable[_Union[_common_pb2.TopicPartition, _Mapping]]] = ..., group_ids: _Optional[_Iterable[str]] = ..., transactional_id: _Optional[str] = ...) -> None: ...

class WriteTxnMarkersRequest(_message.Message):
    __slots__ = ("markers", "timeout_ms")
    MARKERS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    markers: _containers.RepeatedCompositeFieldContainer[WriteTxnMarker]
    timeout_ms: int
    def __init__(self, markers: _Optional[_Iterable[_Union[WriteTxnMarker, _Mapping]]] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class WriteTxnMarkerResult(_message.Message):
    __slots__ = ("producer_id", "partitions", "groups")
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    producer_id: int
    partitions: _containers.RepeatedCompositeFieldContainer[AddPartitionsToTxnResult]
    groups: _containers.RepeatedCompositeFieldContainer[WriteTxnMarkerGroupResult]
    def __init__(self, producer_id: _Optional[int] = ..., partitions: _Optional[_Iterable[_Union[AddPartitionsToTxnResult, _Mapping]]] = ..., groups: _Optional[_Iterable[_Union[WriteTxnMarkerGroupResult, _Mapping]]] = ...) -> None: ...

class WriteTxnMarkerGroupResult(_message.Message):
    __slots__ = ("group_id", "error_code", "error_message")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    error_code: _common_pb2.ErrorCode
    error_message: str
    def __init__(self, group_id: _Optional[str] = ..., error_code: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ...) -> None: ...

class WriteTxnMarkersResponse(_message.Message):
    __slots__ = ("markers",)
    MARKERS_FIELD_NUMBER: _ClassVar[int]
    markers: _containers.RepeatedCompositeFieldContainer[WriteTxnMarkerResult]
    def __init__(self, markers: _Optional[_Iterable[_Union[WriteTxnMarkerResult, _Mapping]]] = ...) -> None: ...

class DescribeProducersRequest(_message.Message):
    __slots__ = ("partitions",)
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    partitions: _containers.RepeatedCompositeFieldContainer[_common_pb2.TopicPartition]
    def __init__(self, partitions: _Optional[_Iterable[_Union[_common_pb2.TopicPartition, _Mapping]]] = ...) -> None: ...

class ActiveProducer(_message.Message):
    __slots__ = ("producer_id", "producer_epoch", "last_sequence", "last_timestamp_ms", "coordinator_epoch", "current_txn_start_offset")
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    LAST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    LAST_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_EPOCH_FIELD_NUMBER: _ClassVar[int]
    CURRENT_TXN_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp_ms: int
    coordinator_epoch: int
    current_txn_start_offset: int
    def __init__(self, producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ..., last_sequence: _Optional[int] = ..., last_timestamp_ms: _Optional[int] = ..., coordinator_epoch: _Optional[int] = ..., current_txn_start_offset: _Optional[int] = ...) -> None: ...

class DescribeProducersResult(_message.Message):
    __slots__ = ("topic", "partition", "error_code", "error_message", "active_producers")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_PRODUCERS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    error_code: _common_pb2.ErrorCode
    error_message: str
    active_producers: _containers.RepeatedCompositeFieldContainer[ActiveProducer]
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., error_code: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., active_producers: _Optional[_Iterable[_Union[ActiveProducer, _Mapping]]] = ...) -> None: ...

class DescribeProducersResponse(_message.Message):
    __slots__ = ("partitions",)
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    partitions: _containers.RepeatedCompositeFieldContainer[DescribeProducersResult]
    def __init__(self, partitions: _Optional[_Iterable[_Union[DescribeProducersResult, _Mapping]]] = ...) -> None: ...

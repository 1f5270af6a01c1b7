from strom.protocol.v1 import common_pb2 as _common_pb2
from strom.protocol.v1 import controller_pb2 as _controller_pb2
from strom.protocol.v1 import coordinator_pb2 as _coordinator_pb2
from strom.protocol.v1 import storage_pb2 as _storage_pb2
from strom.protocol.v1 import transaction_pb2 as _transaction_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CompressionType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    COMPRESSION_NONE: _ClassVar[CompressionType]
    COMPRESSION_GZIP: _ClassVar[CompressionType]
    COMPRESSION_SNAPPY: _ClassVar[CompressionType]
    COMPRESSION_LZ4: _ClassVar[CompressionType]
    COMPRESSION_ZSTD: _ClassVar[CompressionType]
COMPRESSION_NONE: CompressionType
COMPRESSION_GZIP: CompressionType
COMPRESSION_SNAPPY: CompressionType
COMPRESSION_LZ4: CompressionType
COMPRESSION_ZSTD: CompressionType

class RecordHeader(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: bytes
    def __init__(self, key: _Optional[str] = ..., value: _Optional[bytes] = ...) -> None: ...

class Record(_message.Message):
    __slots__ = ("key", "value", "headers", "timestamp_ms", "offset", "timestamp_type")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_TYPE_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    value: bytes
    headers: _containers.RepeatedCompositeFieldContainer[RecordHeader]
    timestamp_ms: int
    offset: int
    timestamp_type: int
    def __init__(self, key: _Optional[bytes] = ..., value: _Optional[bytes] = ..., headers: _Optional[_Iterable[_Union[RecordHeader, _Mapping]]] = ..., timestamp_ms: _Optional[int] = ..., offset: _Optional[int] = ..., timestamp_type: _Optional[int] = ...) -> None: ...

class ProduceRecordsRequest(_message.Message):
    __slots__ = ("topic", "partition", "records", "acks", "timeout_ms", "compression")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    ACKS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    COMPRESSION_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    records: _containers.RepeatedCompositeFieldContainer[Record]
    acks: int
    timeout_ms: int
    compression: CompressionType
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., records: _Optional[_Iterable[_Union[Record, _Mapping]]] = ..., acks: _Optional[int] = ..., timeout_ms: _Optional[int] = ..., compression: _Optional[_Union[CompressionType, str]] = ...) -> None: ...

class ProduceRecordsResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "topic", "partition", "base_offset", "log_append_time_ms")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    BASE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LOG_APPEND_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    error_code: _common_pb2.ErrorCode
    error_message: str
    topic: str
    partition: int
    base_offset: int
    log_append_time_ms: int
    def __init__(self, error_code: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., topic: _Optional[str] = ..., partition: _Optional[int] = ..., base_offset: _Optional[int] = ..., log_append_time_ms: _Optional[int] = ...) -> None: ...

class FetchRecordsRequest(_message.Message):
    __slots__ = ("topic", "partition", "offset", "max_records", "max_bytes", "max_wait_ms", "isolation_level")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAX_RECORDS_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    ISOLATION_LEVEL_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    offset: int
    max_records: int
    max_bytes: int
    max_wait_ms: int
    isolation_level: _common_pb2.IsolationLevel
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., offset: _Optional[int] = ..., max_records: _Optional[int] = ..., max_bytes: _Optional[int] = ..., max_wait_ms: _Optional[int] = ..., isolation_level: _Optional[_Union[_common_pb2.IsolationLevel, str]] = ...) -> None: ...

class FetchRecordsResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "high_watermark", "log_start_offset", "records", "next_offset")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    NEXT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    error_code: _common_pb2.ErrorCode
    error_message: str
    high_watermark: int
    log_start_offset: int
    records: _containers.RepeatedCompositeFieldContainer[Record]
    next_offset: int
    def __init__(self, error_code: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., high_watermark: _Optional[int] = ..., log_start_offset: _Optional[int] = ..., records: _Optional[_Iterable[_Union[Record, _Mapping]]] = ..., next_offset: _Optional[int] = ...) -> None: ...

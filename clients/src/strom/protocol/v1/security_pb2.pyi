from strom.protocol.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AuthenticateRequest(_message.Message):
    __slots__ = ("mechanism", "message", "session_id")
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    mechanism: str
    message: bytes
    session_id: str
    def __init__(self, mechanism: _Optional[str] = ..., message: _Optional[bytes] = ..., session_id: _Optional[str] = ...) -> None: ...

class AuthenticateResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "message", "session_id", "token", "token_lifetime_ms", "principal")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOKEN_LIFETIME_MS_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    error_code: _common_pb2.ErrorCode
    error_message: str
    message: bytes
    session_id: str
    token: str
    token_lifetime_ms: int
    principal: str
    def __init__(self, error_code: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., message: _Optional[bytes] = ..., session_id: _Optional[str] = ..., token: _Optional[str] = ..., token_lifetime_ms: _Optional[int] = ..., principal: _Optional[str] = ...) -> None: ...

class UserScramCredentialUpsertion(_message.Message):
    __slots__ = ("name", "mechanism", "iterations", "salt", "salted_password")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    SALT_FIELD_NUMBER: _ClassVar[int]
    SALTED_PASSWORD_FIELD_NUMBER: _ClassVar[int]
    name: str
    mechanism: str
    iterations: int
    salt: bytes
    salted_password: bytes
    def __init__(self, name: _Optional[str] = ..., mechanism: _Optional[str] = ..., iterations: _Optional[int] = ..., salt: _Optional[bytes] = ..., salted_password: _Optional[bytes] = ...) -> None: ...

class UserScramCredentialDeletion(_message.Message):
    __slots__ = ("name", "mechanism")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    name: str
    mechanism: str
    def __init__(self, name: _Optional[str] = ..., mechanism: _Optional[str] = ...) -> None: ...

class AlterUserScramCredentialsRequest(_message.Message):
    __slots__ = ("upsertions", "deletions")
    UPSERTIONS_FIELD_NUMBER: _ClassVar[int]
    DELETIONS_FIELD_NUMBER: _ClassVar[int]
    upsertions: _containers.RepeatedCompositeFieldContainer[UserScramCredentialUpsertion]
    deletions: _containers.RepeatedCompositeFieldContainer[UserScramCredentialDeletion]
    def __init__(self, upsertions: _Optional[_Iterable[_Union[UserScramCredentialUpsertion, _Mapping]]] = ..., deletions: _Optional[_Iterable[_Union[UserScramCredentialDeletion, _Mapping]]] = ...) -> None: ...

class AlterUserScramCredentialsResponse(_message.Message):
    __slots__ = ("results",)
    class Result(_message.Message):
        __slots__ = ("user", "error_code", "error_message")
        USER_FIELD_NUMBER: _ClassVar[int]
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
        user: str
        error_code: _common_pb2.ErrorCode
        error_message: str
        def __init__(self, user: _Optional[str] = ..., error_code: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ...) -> None: ...
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[AlterUserScramCredentialsResponse.Result]
    def __init__(self, results: _Optional[_Iterable[_Union[AlterUserScramCredentialsResponse.Result, _Mapping]]] = ...) -> None: ...

class DescribeUserScramCredentialsRequest(_message.Message):
    __slots__ = ("users",)
    USERS_FIELD_NUMBER: _ClassVar[int]
    users: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, users: _Optional[_Iterable[str]] = ...) -> None: ...

class DescribeUserScramCredentialsResponse(_message.Message):
    __slots__ = ("users",)
    class Credential(_message.Message):
        __slots__ = ("mechanism", "iterations")
        MECHANISM_FIELD_NUMBER: _ClassVar[int]
        ITERATIONS_FIELD_NUMBER: _ClassVar[int]
        mechanism: str
        iterations: int
        def __init__(self, mechanism: _Optional[str] = ..., iterations: _Optional[int] = ...) -> None: ...
    class User(_message.Message):
        __slots__ = ("name", "credentials", "error_code", "error_message")
        NAME_FIELD_NUMBER: _ClassVar[int]
        CREDENTIALS_FIELD_NUMBER: _ClassVar[int]
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
        name: str
        credentials: _containers.RepeatedCompositeFieldContainer[DescribeUserScramCredentialsResponse.Credential]
        error_code: _common_pb2.ErrorCode
        error_message: str
        def __init__(self, name: _Optional[str] = ..., credentials: _Optional[_Iterable[_Union[DescribeUserScramCredentialsResponse.Credential, _Mapping]]] = ..., error_code: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ...) -> None: ...
    USERS_FIELD_NUMBER: _ClassVar[int]
    users: _containers.RepeatedCompositeFieldContainer[DescribeUserScramCredentialsResponse.User]
    def __init__(self, users: _Optional[_Iterable[_Union[DescribeUserScramCredentialsResponse.User, _Mapping]]] = ...) -> None: ...

class AclBinding(_message.Message):
    __slots__ = ("resource_type", "resource_name", "pattern_type", "principal", "host", "operation", "permission_type")
    RESOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_NAME_FIELD_NUMBER: _ClassVar[int]
    PATTERN_TYPE_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_TYPE_FIELD_NUMBER: _ClassVar[int]
    resource_type: str
    resource_name: str
    pattern_type: str
    principal: str
    host: str
    operation: str
    permission_type: str
    def __init__(self, resource_type: _Optional[str] = ..., resource_name: _Optional[str] = ..., pattern_type: _Optional[str] = ..., principal: _Optional[str] = ..., host: _Optional[str] = ..., operation: _Optional[str] = ..., permission_type: _Optional[str] = ...) -> None: ...

class CreateAclsRequest(_message.Message):
    __slots__ = ("creations",)
    CREATIONS_FIELD_NUMBER: _ClassVar[int]
    creations: _containers.RepeatedCompositeFieldContainer[AclBinding]
    def __init__(self, creations: _Optional[_Iterable[_Union[AclBinding, _Mapping]]] = ...) -> None: ...

class AclResult(_message.Message):
    __slots__ = ("error_code", "error_message")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    error_code: _common_pb2.ErrorCode
    error_message: str
    def __init__(self, error_code: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ...) -> None: ...

class CreateAclsResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[AclResult]
    def __init__(self, results: _Optional[_Iterable[_Union[AclResult, _Mapping]]] = ...) -> None: ...

class DeleteAclsRequest(_message.Message):
    __slots__ = ("filters",)
    FILTERS_FIELD_NUMBER: _ClassVar[int]
    filters: _containers.RepeatedCompositeFieldContainer[AclBinding]
    def __init__(self, filters: _Optional[_Iterable[_Union[AclBinding, _Mapping]]] = ...) -> None: ...

class DeleteAclsResponse(_message.Message):
    __slots__ = ("results",)
    class FilterResult(_message.Message):
        __slots__ = ("error_code", "error_message", "deleted")
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
        DELETED_FIELD_NUMBER: _ClassVar[int]
        error_code: _common_pb2.ErrorCode
        error_message: str
        deleted: _containers.RepeatedCompositeFieldContainer[AclBinding]
        def __init__(self, error_code: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., deleted: _Optional[_Iterable[_Union[AclBinding, _Mapping]]] = ...) -> None: ...
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[DeleteAclsResponse.FilterResult]
    def __init__(self, results: _Optional[_Iterable[_Union[DeleteAclsResponse.FilterResult, _Mapping]]] = ...) -> None: ...

class DescribeAclsRequest(_message.Message):
    __slots__ = ("filter",)
    FILTER_FIELD_NUMBER: _ClassVar[int]
    filter: AclBinding
    def __init__(self, filter: _Optional[_Union[AclBinding, _Mapping]] = ...) -> None: ...

class DescribeAclsResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "acls")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ACLS_FIELD_NUMBER: _ClassVar[int]
    error_code: _common_pb2.ErrorCode
    error_message: str
    acls: _containers.RepeatedCompositeFieldContainer[AclBinding]
    def __init__(self, error_code: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., acls: _Optional[_Iterable[_Union[AclBinding, _Mapping]]] = ...) -> None: ...

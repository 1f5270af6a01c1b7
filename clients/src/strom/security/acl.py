"""Kafka's ACL model as values: resource types, pattern types, operations, permissions, and
one ACL binding (docs/security.md).

Shared by the servers (which store and enforce ACLs) and the tools (which create and list
them). Names parse case-insensitively in Kafka's spellings: ``Topic``, ``TOPIC``,
``TransactionalId``, ``transactional-id``, ``IdempotentWrite``, ``IDEMPOTENT_WRITE``, ...
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeVar

from strom.errors import ConfigurationError

__all__ = [
    "CLUSTER_NAME",
    "WILDCARD",
    "AclBinding",
    "AclFilter",
    "Operation",
    "PatternType",
    "Permission",
    "ResourceType",
    "implied_by",
    "parse_enum",
    "validate_principal",
]

#: The one cluster resource's name (Kafka's).
CLUSTER_NAME = "kafka-cluster"
#: A LITERAL resource name, principal or host matching every value.
WILDCARD = "*"


class ResourceType(StrEnum):
    TOPIC = "TOPIC"
    GROUP = "GROUP"
    CLUSTER = "CLUSTER"
    TRANSACTIONAL_ID = "TRANSACTIONAL_ID"


class PatternType(StrEnum):
    LITERAL = "LITERAL"
    PREFIXED = "PREFIXED"


class Operation(StrEnum):
    ALL = "ALL"
    READ = "READ"
    WRITE = "WRITE"
    CREATE = "CREATE"
    DELETE = "DELETE"
    ALTER = "ALTER"
    DESCRIBE = "DESCRIBE"
    CLUSTER_ACTION = "CLUSTER_ACTION"
    DESCRIBE_CONFIGS = "DESCRIBE_CONFIGS"
    ALTER_CONFIGS = "ALTER_CONFIGS"
    IDEMPOTENT_WRITE = "IDEMPOTENT_WRITE"


class Permission(StrEnum):
    ALLOW = "ALLOW"
    DENY = "DENY"


_IMPLIED: dict[Operation, frozenset[Operation]] = {
    Operation.DESCRIBE: frozenset(
        {
            Operation.DESCRIBE,
            Operation.READ,
            Operation.WRITE,
            Operation.DELETE,
            Operation.ALTER,
            Operation.ALL,
        }
    ),
    Operation.DESCRIBE_CONFIGS: frozenset(
        {Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS, Operation.ALL}
    ),
}


def implied_by(operation: Operation) -> frozenset[Operation]:
    """The operations an ALLOW ACL may name to allow ``operation`` (Kafka's implications: READ,
    WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS; ALL
    implies everything)."""
    return _IMPLIED.get(operation) or frozenset({operation, Operation.ALL})


E = TypeVar("E", bound=StrEnum)


def _key(text: str) -> str:
    # IdempotentWrite / idempotent-write / IDEMPOTENT_WRITE -> IDEMPOTENTWRITE
    return re.sub(r"[^A-Za-z]", "", text).upper()


def parse_enum(cls: type[E], value: str | E, what: str) -> E:
    """``value`` as a member of ``cls`` in any of Kafka's spellings; ConfigurationError naming
    ``what`` and the accepted values otherwise."""
    if isinstance(value, cls):
        return value
    wanted = _key(str(value))
    for member in cls:
        if _key(member.value) == wanted:
            return member
    choices = ", ".join(m.value for m in cls)
    raise ConfigurationError(f"{what} must be one of {choices}, got {value!r}")


def validate_principal(principal: str) -> str:
    """``Type:name`` (``User:alice``, ``User:*``); ConfigurationError otherwise."""
    kind, sep, name = principal.partition(":")
    if not sep or not kind or not name:
        raise ConfigurationError(f"principal must look like User:name, got {principal!r}")
    return principal


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL: who (principal, host) may or may not (permission) do what (operation) to which
    resources (type, name, pattern type)."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: Operation
    permission: Permission

    @classmethod
    def create(
        cls,
        resource_type: str,
        resource_name: str,
        principal: str,
        operation: str,
        permission: str = "ALLOW",
        *,
        pattern_type: str = "LITERAL",
        host: str = WILDCARD,
    ) -> AclBinding:
        """A binding from text in Kafka's spellings, every part checked."""
        rtype = parse_enum(ResourceType, resource_type, "resource type")
        if rtype is ResourceType.CLUSTER and not resource_name:
            resource_name = CLUSTER_NAME
        if not resource_name:
            raise ConfigurationError("the resource name is empty")
        return cls(
            rtype,
            resource_name,
            parse_enum(PatternType, pattern_type, "pattern type"),
            validate_principal(principal),
            host or WILDCARD,
            parse_enum(Operation, operation, "operation"),
            parse_enum(Permission, permission, "permission"),
        )

    def to_dict(self) -> dict[str, str]:
        return {
            "resource_type": self.resource_type.value,
            "resource_name": self.resource_name,
            "pattern_type": self.pattern_type.value,
            "principal": self.principal,
            "host": self.host,
            "operation": self.operation.value,
            "permission_type": self.permission.value,
        }

    @classmethod
    def from_dict(cls, value: dict[str, Any]) -> AclBinding:
        return cls.create(
            value["resource_type"],
            value["resource_name"],
            value["principal"],
            value["operation"],
            value.get("permission_type", "ALLOW"),
            pattern_type=value.get("pattern_type", "LITERAL"),
            host=value.get("host", WILDCARD),
        )

    def __str__(self) -> str:
        return (
            f"{self.principal} {self.permission.value} {self.operation.value} from {self.host} "
            f"on {self.resource_type.value}:{self.pattern_type.value}:{self.resource_name}"
        )


@dataclass(frozen=True, slots=True)
class AclFilter:
    """Matches bindings field by field; None (or ``ANY`` as text) matches every value."""

    resource_type: ResourceType | None = None
    resource_name: str | None = None
    pattern_type: PatternType | None = None
    principal: str | None = None
    host: str | None = None
    operation: Operation | None = None
    permission: Permission | None = None

    @classmethod
    def from_dict(cls, value: dict[str, Any]) -> AclFilter:
        """A filter from text fields; empty or ``ANY`` means any."""

        def text(key: str) -> str | None:
            raw = value.get(key) or ""
            return None if raw == "" or raw.upper() == "ANY" else str(raw)

        def member(key: str, enum: type[E], what: str) -> E | None:
            raw = text(key)
            return None if raw is None else parse_enum(enum, raw, what)

        return cls(
            member("resource_type", ResourceType, "resource type"),
            text("resource_name"),
            member("pattern_type", PatternType, "pattern type"),
            text("principal"),
            text("host"),
            member("operation", Operation, "operation"),
            member("permission_type", Permission, "permission"),
        )

    def matches(self, acl: AclBinding) -> bool:
        return (
            (self.resource_type is None or acl.resource_type is self.resource_type)
            and (self.resource_name is None or acl.resource_name == self.resource_name)
            and (self.pattern_type is None or acl.pattern_type is self.pattern_type)
            and (self.principal is None or acl.principal == self.principal)
            and (self.host is None or acl.host == self.host)
            and (self.operation is None or acl.operation is self.operation)
            and (self.permission is None or acl.permission is self.permission)
        )

"""The ACL authorizer: Kafka's matching, implications, deny-wins, super users, the default;
the Produce rule over serialized requests."""

from __future__ import annotations

import grpc
import pytest

from strom.errors import (
    ConfigurationError,
    InvalidRequestError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
)
from strom.protocol.v1 import storage_pb2
from strom.security.acl import AclBinding, AclFilter, Operation, ResourceType
from strom_server.security.authorizer import SERVICE_PRINCIPAL, Authorizer
from strom_server.security.guard import RequestGuard, _Caller
from strom_server.security.rules import rule_for

T = ResourceType.TOPIC
G = ResourceType.GROUP
ALICE = "User:alice"


def acl(
    name: str, op: str, perm: str = "ALLOW", *, principal: str = ALICE, **kw: str
) -> AclBinding:
    rtype = kw.pop("rtype", "TOPIC")
    return AclBinding.create(rtype, name, principal, op, perm, **kw)


def test_literal_allow_only_that_topic() -> None:
    auth = Authorizer([acl("orders", "READ")])
    assert auth.authorize(ALICE, "*", Operation.READ, T, "orders")
    assert not auth.authorize(ALICE, "*", Operation.READ, T, "payments")
    assert not auth.authorize(ALICE, "*", Operation.WRITE, T, "orders")
    assert not auth.authorize("User:bob", "*", Operation.READ, T, "orders")


@pytest.mark.parametrize(
    ("granted", "asked", "allowed"),
    [
        ("READ", "DESCRIBE", True),
        ("WRITE", "DESCRIBE", True),
        ("DELETE", "DESCRIBE", True),
        ("ALTER", "DESCRIBE", True),
        ("CREATE", "DESCRIBE", False),
        ("ALTER_CONFIGS", "DESCRIBE_CONFIGS", True),
        ("DESCRIBE_CONFIGS", "ALTER_CONFIGS", False),
        ("DESCRIBE", "READ", False),
        ("ALL", "WRITE", True),
        ("ALL", "IDEMPOTENT_WRITE", True),
    ],
)
def test_implications(granted: str, asked: str, allowed: bool) -> None:
    auth = Authorizer([acl("t", granted)])
    assert auth.authorize(ALICE, "*", Operation(asked), T, "t") is allowed


def test_deny_wins_over_allow_and_all() -> None:
    auth = Authorizer([acl("*", "ALL"), acl("secret", "READ", "DENY")])
    assert auth.authorize(ALICE, "*", Operation.READ, T, "public")
    assert not auth.authorize(ALICE, "*", Operation.READ, T, "secret")
    # A DENY names one operation (or ALL): denying READ does not deny DESCRIBE.
    assert auth.authorize(ALICE, "*", Operation.DESCRIBE, T, "secret")
    auth.apply(added=[acl("secret", "ALL", "DENY")])
    assert not auth.authorize(ALICE, "*", Operation.DESCRIBE, T, "secret")


def test_prefixed_and_wildcard_principal() -> None:
    auth = Authorizer(
        [
            acl("logs-", "WRITE", pattern_type="PREFIXED"),
            acl("shared", "READ", principal="User:*"),
        ]
    )
    assert auth.authorize(ALICE, "*", Operation.WRITE, T, "logs-app")
    assert auth.authorize(ALICE, "*", Operation.WRITE, T, "logs-")
    assert not auth.authorize(ALICE, "*", Operation.WRITE, T, "logs")
    assert not auth.authorize(ALICE, "*", Operation.WRITE, T, "xlogs-app")
    assert auth.authorize("User:anyone", "*", Operation.READ, T, "shared")


def test_resource_types_are_separate() -> None:
    auth = Authorizer([acl("app", "READ", rtype="GROUP")])
    assert auth.authorize(ALICE, "*", Operation.READ, G, "app")
    assert not auth.authorize(ALICE, "*", Operation.READ, T, "app")


def test_host_restriction() -> None:
    auth = Authorizer([acl("t", "READ", host="10.0.0.1")])
    assert auth.authorize(ALICE, "10.0.0.1", Operation.READ, T, "t")
    assert not auth.authorize(ALICE, "10.0.0.2", Operation.READ, T, "t")


def test_super_users_and_service_principal() -> None:
    auth = Authorizer([acl("t", "ALL", "DENY", principal="User:*")], super_users=["User:admin"])
    assert auth.authorize("User:admin", "*", Operation.DELETE, T, "t")
    assert auth.authorize(SERVICE_PRINCIPAL, "*", Operation.CLUSTER_ACTION, T, "t")
    assert not auth.authorize(ALICE, "*", Operation.READ, T, "t")


def test_allow_everyone_if_no_acl_found() -> None:
    closed = Authorizer([acl("t", "READ")])
    open_ = Authorizer([acl("t", "READ")], allow_everyone_if_no_acl_found=True)
    assert not closed.authorize("User:bob", "*", Operation.WRITE, T, "other")
    assert open_.authorize("User:bob", "*", Operation.WRITE, T, "other")
    # A resource with ACLs is never open to everyone.
    assert not open_.authorize("User:bob", "*", Operation.READ, T, "t")


def test_changes_drop_cached_decisions() -> None:
    granted = acl("t", "READ")
    auth = Authorizer([granted])
    assert auth.authorize(ALICE, "*", Operation.READ, T, "t")
    auth.apply(removed=[granted])
    assert not auth.authorize(ALICE, "*", Operation.READ, T, "t")
    auth.replace([granted])
    assert auth.authorize(ALICE, "*", Operation.READ, T, "t")


def test_binding_parsing_and_filters() -> None:
    binding = AclBinding.create("Topic", "t", ALICE, "IdempotentWrite", "allow")
    assert binding.operation is Operation.IDEMPOTENT_WRITE
    assert AclBinding.from_dict(binding.to_dict()) == binding
    cluster = AclBinding.create("cluster", "", ALICE, "create")
    assert cluster.resource_name == "kafka-cluster"
    assert AclFilter.from_dict({"principal": ALICE, "operation": "ANY"}).matches(binding)
    assert not AclFilter.from_dict({"resource_type": "GROUP"}).matches(binding)
    with pytest.raises(ConfigurationError, match="operation must be one of"):
        AclBinding.create("TOPIC", "t", ALICE, "FLY")
    with pytest.raises(ConfigurationError, match="principal"):
        AclBinding.create("TOPIC", "t", "alice", "READ")


def test_produce_rule_reads_serialized_requests_as_the_storage_node_does() -> None:
    """The storage node's Produce arrives as bytes: the guard checks the topics and the
    transactional id in them, and bytes that are no ProduceRequest are INVALID_REQUEST (as the
    node answers them without security), not an unexpected error."""
    auth = Authorizer([acl("orders", "WRITE"), acl("tx", "WRITE", rtype="TRANSACTIONAL_ID")])
    check = rule_for("/strom.protocol.v1.StorageNode/Produce").require
    assert check is not None
    caller = _Caller(ALICE, "127.0.0.1", auth, "Produce")
    request = storage_pb2.ProduceRequest(transactional_id="tx")
    request.partitions.add(topic="orders", partition=0, records=b"batch")
    check(caller, request.SerializeToString())
    check(caller, request)
    request.partitions.add(topic="payments", partition=0, records=b"batch")
    with pytest.raises(TopicAuthorizationFailedError):
        check(caller, request.SerializeToString())
    with pytest.raises(TransactionalIdAuthorizationFailedError):
        check(caller, storage_pb2.ProduceRequest(transactional_id="other").SerializeToString())
    with pytest.raises(InvalidRequestError, match="malformed ProduceRequest"):
        check(caller, b"\x1a\x05ab")


def test_the_guard_refuses_to_leave_a_synchronous_handler_unchecked() -> None:
    guard = RequestGuard(verifier=None, authorizer=Authorizer(), require_authentication=True)
    handler = grpc.unary_unary_rpc_method_handler(lambda request, context: request)
    with pytest.raises(TypeError, match="coroutine"):
        guard.wrap("/strom.protocol.v1.StorageNode/Produce", handler)
    public = "/grpc.health.v1.Health/Check"
    assert guard.wrap(public, handler) is handler

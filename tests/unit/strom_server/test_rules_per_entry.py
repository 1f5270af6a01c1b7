"""The ACL rules table: every RPC of the proto services has a rule (a new RPC cannot be
forgotten), and requests naming several topics or groups are answered per entry."""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

import pytest

from strom.errors import ErrorCode, GroupAuthorizationFailedError, TopicAuthorizationFailedError
from strom.protocol import v1
from strom.protocol.v1 import controller_pb2, coordinator_pb2, storage_pb2, transaction_pb2
from strom.security.acl import AclBinding
from strom_server.security.authorizer import Authorizer
from strom_server.security.guard import _Caller
from strom_server.security.rules import PUBLIC_METHODS, has_rule, rule_for

ALICE = "User:alice"


def _methods() -> list[str]:
    found = []
    for module in pkgutil.iter_modules(v1.__path__):
        if module.name.endswith("_pb2"):
            descriptor = importlib.import_module(f"{v1.__name__}.{module.name}").DESCRIPTOR
            for service in descriptor.services_by_name.values():
                found += [f"/{service.full_name}/{m.name}" for m in service.methods]
    return found


def test_every_rpc_of_every_service_has_a_rule() -> None:
    methods = _methods()
    assert "/strom.protocol.v1.StorageNode/FetchStream" in methods  # the walk finds them
    missing = [m for m in methods if m not in PUBLIC_METHODS and not has_rule(m.split("/")[-1])]
    assert not missing, f"add a rule to strom_server/security/rules.py for {missing}"


def _caller(*acls: AclBinding) -> _Caller:
    return _Caller(ALICE, "127.0.0.1", Authorizer(list(acls)), "test")


def _split(method: str, caller: _Caller, request: object) -> tuple[object, list]:
    return rule_for(f"/strom.protocol.v1.Gateway/{method}").split(caller, request)


def _answered(method: str, response: Any, refused: list) -> Any:
    """``response`` with ``method``'s answers to the ``refused`` entries."""
    entries = rule_for(f"/strom.protocol.v1.Gateway/{method}").entries
    assert entries is not None
    return entries.answer(response, refused)


def test_a_fetch_of_an_allowed_and_a_refused_topic_is_answered_per_partition() -> None:
    caller = _caller(AclBinding.create("TOPIC", "a", ALICE, "READ"))
    request = storage_pb2.FetchRequest(replica_id=-1)
    for topic in ("a", "b", "a"):
        request.partitions.add(topic=topic, partition=len(request.partitions))
    narrowed, refused = _split("Fetch", caller, request)
    assert [p.topic for p in narrowed.partitions] == ["a", "a"]
    assert [(e.topic, e.partition) for e, _ in refused] == [("b", 1)]
    # the storage node answers Fetch pre-serialized: the refused result is appended
    served = storage_pb2.FetchResponse(correlation_id=7)
    served.partitions.add(topic="a", partition=0, high_watermark=3)
    answer = storage_pb2.FetchResponse.FromString(
        _answered("Fetch", served.SerializeToString(), refused)
    )
    assert answer.correlation_id == 7
    assert [(p.topic, p.partition, p.error_code) for p in answer.partitions] == [
        ("a", 0, 0),
        ("b", 1, ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    ]
    assert "may not READ TOPIC 'b'" in answer.partitions[1].error_message
    # every topic refused: the whole request is refused, as before
    only_b = storage_pb2.FetchRequest(replica_id=-1)
    only_b.partitions.add(topic="b", partition=0)
    with pytest.raises(TopicAuthorizationFailedError):
        _split("Fetch", caller, only_b)


def test_a_serialized_produce_keeps_its_allowed_entries_and_transactional_id() -> None:
    caller = _caller(
        AclBinding.create("TOPIC", "a", ALICE, "WRITE"),
        AclBinding.create("TRANSACTIONAL_ID", "tx", ALICE, "WRITE"),
    )
    request = storage_pb2.ProduceRequest(acks=-1, transactional_id="tx", client_id="c")
    request.partitions.add(topic="a", partition=0, records=b"batch-a")
    request.partitions.add(topic="b", partition=0, records=b"batch-b")
    narrowed, refused = _split("Produce", caller, request.SerializeToString())
    kept = storage_pb2.ProduceRequest.FromString(narrowed)
    assert (kept.acks, kept.transactional_id, kept.client_id) == (-1, "tx", "c")
    assert [(p.topic, p.records) for p in kept.partitions] == [("a", b"batch-a")]
    assert [e.topic for e, _ in refused] == ["b"]
    answer = storage_pb2.ProduceResponse.FromString(_answered("Produce", b"", refused))
    assert [(p.topic, p.error_code) for p in answer.partitions] == [
        ("b", ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    ]


def test_topic_and_group_lists_are_answered_per_name() -> None:
    caller = _caller(
        AclBinding.create("TOPIC", "a", ALICE, "DELETE"),
        AclBinding.create("GROUP", "g", ALICE, "DESCRIBE"),
        AclBinding.create("GROUP", "g", ALICE, "READ"),
        AclBinding.create("TOPIC", "a", ALICE, "READ"),
    )
    narrowed, refused = _split(
        "DeleteTopics", caller, controller_pb2.DeleteTopicsRequest(names=["a", "b"])
    )
    assert list(narrowed.names) == ["a"]
    answer = _answered("DeleteTopics", controller_pb2.DeleteTopicsResponse(), refused)
    assert [(t.name, t.error_code) for t in answer.topics] == [
        ("b", ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    ]
    create = controller_pb2.CreateTopicsRequest()
    for name in ("a", "b"):
        create.topics.add(name=name, num_partitions=1)
    with pytest.raises(TopicAuthorizationFailedError):  # CREATE on neither
        _split("CreateTopics", caller, create)
    creator = _caller(AclBinding.create("TOPIC", "a", ALICE, "CREATE"))
    narrowed, refused = _split("CreateTopics", creator, create)
    assert [t.name for t in narrowed.topics] == ["a"]
    everywhere = _caller(AclBinding.create("CLUSTER", "", ALICE, "CREATE"))
    assert _split("CreateTopics", everywhere, create) == (create, [])
    groups = coordinator_pb2.DescribeGroupsRequest(group_ids=["g", "h"])
    narrowed, refused = _split("DescribeGroups", caller, groups)
    assert list(narrowed.group_ids) == ["g"]
    answer = _answered("DescribeGroups", coordinator_pb2.DescribeGroupsResponse(), refused)
    assert [(g.group_id, g.error_code) for g in answer.groups] == [
        ("h", ErrorCode.GROUP_AUTHORIZATION_FAILED)
    ]
    commit = coordinator_pb2.OffsetCommitRequest(group_id="g")
    commit.partitions.add(topic="a", partition=0)
    commit.partitions.add(topic="b", partition=0)
    narrowed, refused = _split("OffsetCommit", caller, commit)
    assert [p.topic for p in narrowed.partitions] == ["a"]
    with pytest.raises(GroupAuthorizationFailedError):  # the group is checked first, whole
        _split("OffsetCommit", caller, coordinator_pb2.OffsetCommitRequest(group_id="other"))


def test_an_offset_fetch_of_every_partition_answers_only_describable_topics() -> None:
    caller = _caller(AclBinding.create("TOPIC", "a", ALICE, "DESCRIBE"))
    response = coordinator_pb2.OffsetFetchResponse()
    response.partitions.add(topic="a", partition=0, committed_offset=1)
    response.partitions.add(topic="secret", partition=0, committed_offset=2)
    rule = rule_for("/x/OffsetFetch")
    assert rule.filter is not None
    answer = rule.filter(caller, coordinator_pb2.OffsetFetchRequest(group_id="g"), response)
    assert [p.topic for p in answer.partitions] == ["a"]


def test_transactional_and_admin_requests_are_answered_per_entry() -> None:
    caller = _caller(
        AclBinding.create("TRANSACTIONAL_ID", "tx", ALICE, "WRITE"),
        AclBinding.create("GROUP", "g", ALICE, "READ"),
        AclBinding.create("GROUP", "g", ALICE, "DELETE"),
        AclBinding.create("TOPIC", "a", ALICE, "READ"),
        AclBinding.create("TOPIC", "a", ALICE, "ALTER"),
    )
    commit = coordinator_pb2.TxnOffsetCommitRequest(transactional_id="tx", group_id="g")
    commit.partitions.add(topic="a", partition=0)
    commit.partitions.add(topic="b", partition=0)
    narrowed, refused = _split("TxnOffsetCommit", caller, commit)
    assert [p.topic for p in narrowed.partitions] == ["a"]
    assert [e.topic for e, _ in refused] == ["b"]
    delete = coordinator_pb2.OffsetDeleteRequest(group_id="g")
    delete.partitions.add(topic="b", partition=0)
    delete.partitions.add(topic="a", partition=1)
    narrowed, _ = _split("OffsetDelete", caller, delete)
    assert [(p.topic, p.partition) for p in narrowed.partitions] == [("a", 1)]
    grow = controller_pb2.CreatePartitionsRequest()
    grow.topics.add(name="a", count=2)
    grow.topics.add(name="b", count=2)
    narrowed, _ = _split("CreatePartitions", caller, grow)
    assert [t.name for t in narrowed.topics] == ["a"]
    describe = transaction_pb2.DescribeTransactionsRequest(transactional_ids=["tx", "other"])
    narrowed, refused = _split("DescribeTransactions", caller, describe)
    assert list(narrowed.transactional_ids) == ["tx"]
    response = transaction_pb2.DescribeTransactionsResponse()
    answer = _answered("DescribeTransactions", response, refused)
    assert [(t.transactional_id, t.error_code) for t in answer.transactions] == [
        ("other", ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    ]


def test_config_requests_are_answered_per_resource() -> None:
    """DescribeConfigs and IncrementalAlterConfigs: each resource on its own, a topic needing
    its ACL and a broker the cluster's (CLUSTER_AUTHORIZATION_FAILED when refused)."""
    caller = _caller(
        AclBinding.create("TOPIC", "a", ALICE, "ALTER_CONFIGS"),  # implies DESCRIBE_CONFIGS
    )
    topic, broker = controller_pb2.RESOURCE_TOPIC, controller_pb2.RESOURCE_BROKER
    describe = controller_pb2.DescribeConfigsRequest()
    for kind, name in ((topic, "a"), (topic, "b"), (broker, "1")):
        describe.resources.add(type=kind, name=name)
    narrowed, refused = _split("DescribeConfigs", caller, describe)
    assert [(r.type, r.name) for r in narrowed.resources] == [(topic, "a")]
    served = controller_pb2.DescribeConfigsResponse()
    served.results.add(type=topic, name="a")
    answer = _answered("DescribeConfigs", served, refused)
    assert [(r.type, r.name, r.error_code) for r in answer.results] == [
        (topic, "a", 0),
        (topic, "b", ErrorCode.TOPIC_AUTHORIZATION_FAILED),
        (broker, "1", ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    ]
    alter = controller_pb2.IncrementalAlterConfigsRequest()
    for name in ("b", "a"):
        alter.resources.add(type=topic, name=name).ops.add(name="retention.ms", value="1")
    narrowed, refused = _split("IncrementalAlterConfigs", caller, alter)
    assert [r.name for r in narrowed.resources] == ["a"]
    assert [(e.name, type(error)) for e, error in refused] == [("b", TopicAuthorizationFailedError)]
    with pytest.raises(TopicAuthorizationFailedError):  # every resource refused: whole
        _split("DescribeConfigs", caller, controller_pb2.DescribeConfigsRequest(
            resources=[controller_pb2.ConfigResource(type=topic, name="b")]
        ))  # fmt: skip


def test_add_partitions_to_txn_is_all_or_nothing() -> None:
    """Some partitions refused: nothing is added (no request goes on), the refused ones answer
    TOPIC_AUTHORIZATION_FAILED and the others OPERATION_NOT_ATTEMPTED, as Kafka answers."""
    caller = _caller(
        AclBinding.create("TRANSACTIONAL_ID", "tx", ALICE, "WRITE"),
        AclBinding.create("TOPIC", "a", ALICE, "WRITE"),
    )
    add = transaction_pb2.AddPartitionsToTxnRequest(transactional_id="tx", producer_id=7)
    for topic, partition in (("a", 0), ("b", 0), ("a", 1)):
        add.partitions.add(topic=topic, partition=partition)
    narrowed, refused = _split("AddPartitionsToTxn", caller, add)
    assert narrowed is None
    answer = _answered("AddPartitionsToTxn", None, refused)
    assert sorted((r.topic, r.partition, r.error_code) for r in answer.results) == [
        ("a", 0, ErrorCode.OPERATION_NOT_ATTEMPTED),
        ("a", 1, ErrorCode.OPERATION_NOT_ATTEMPTED),
        ("b", 0, ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    ]
    assert all(r.error_message for r in answer.results)
    only_a = transaction_pb2.AddPartitionsToTxnRequest(transactional_id="tx")
    only_a.partitions.add(topic="a", partition=0)
    assert _split("AddPartitionsToTxn", caller, only_a) == (only_a, [])
    with pytest.raises(TopicAuthorizationFailedError):  # every partition refused: whole
        _split("AddPartitionsToTxn", caller, transaction_pb2.AddPartitionsToTxnRequest(
            transactional_id="tx", partitions=[add.partitions[1]]
        ))  # fmt: skip

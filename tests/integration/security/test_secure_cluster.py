"""A secure cluster end to end: logins, the deny matrix over every public RPC of every service,
direct storage access, answers per topic, a revoked ACL stopping a running consumer and a
streaming fetch, groups needing READ on group and topic."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from cluster_testkit import assert_ok, assert_one_line_error, run_strom
from google.protobuf import message_factory
from security_testkit import SecureCluster
from strom_testkit import wait_until

from strom import Admin, Consumer, Producer
from strom.aio import Consumer as AsyncConsumer
from strom.cluster import translate_errors
from strom.cluster.login import ScramLogin
from strom.errors import (
    AuthorizationFailedError,
    GroupAuthorizationFailedError,
    SaslAuthenticationFailedError,
    StromError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
    for_code,
)
from strom.protocol.v1 import (
    common_pb2,
    controller_pb2,
    coordinator_pb2,
    gateway_pb2,
    gateway_pb2_grpc,
    security_pb2,
    storage_pb2,
    storage_pb2_grpc,
    transaction_pb2,
)
from strom.records.batch import encode_batch
from strom.security import ChannelSecurity, SecurityConfig
from strom.security.acl import AclBinding
from strom.types import NewTopic, TopicPartition
from strom_server.local import secure
from strom_server.security.rules import INTERNAL_METHODS, PUBLIC_METHODS


def test_admin_logs_in_and_a_stranger_does_not(cluster: SecureCluster) -> None:
    with cluster.admin() as admin:
        admin.create_topics([NewTopic("smoke", 1, 1)])
        assert "smoke" in admin.list_topics()
    with (
        pytest.raises(SaslAuthenticationFailedError),
        cluster.admin(**cluster.options("admin", "wrong")) as admin,
    ):
        admin.list_topics()


def test_user_with_read_acl(cluster: SecureCluster) -> None:
    cluster.add_user("alice", "alice-secret")
    with cluster.admin() as admin:
        admin.create_topics([NewTopic("orders", 1, 1), NewTopic("payroll", 1, 1)])
    cluster.allow(
        AclBinding.create("TOPIC", "orders", "User:alice", "WRITE"),
        AclBinding.create("TOPIC", "orders", "User:alice", "READ"),
        AclBinding.create("CLUSTER", "", "User:alice", "IDEMPOTENT_WRITE"),
    )
    options = cluster.options("alice", "alice-secret")
    with Producer(cluster.gateway, **options) as producer:
        producer.send("orders", b"v1").result(timeout=30)
        # payroll has no ACL at all: refused (allow.everyone.if.no.acl.found is off)
        with pytest.raises(TopicAuthorizationFailedError):
            producer.send("payroll", b"v1").result(timeout=30)
    with Admin(cluster.gateway, **options) as admin:
        assert admin.list_topics() == ["orders"]
        # Whether it exists or not, a topic alice may not describe is answered the same way.
        for name in ("payroll", "no-such-topic"):
            with pytest.raises(TopicAuthorizationFailedError):
                admin.describe_topics([name])


# -- the deny matrix ---------------------------------------------------------------------------

MATRIX_TOPIC = "matrix"
CALLERS = ("no credentials", "wrong password", "no acl", "deny acl", "allow acl", "super user")


def _requests() -> dict[str, Any]:
    """One request per public RPC name (the same message on every service serving it), naming
    the matrix resources; harmless when allowed (no-ops, or refused for other reasons)."""
    part = {"topic": MATRIX_TOPIC, "partition": 0}
    group, txn = "matrix-group", "matrix-txn"
    fetch = storage_pb2.FetchRequest(
        replica_id=-1, max_bytes=1024, partitions=[storage_pb2.FetchPartition(**part)]
    )
    produce = storage_pb2.ProduceRequest(
        acks=1, partitions=[storage_pb2.ProducePartitionData(**part, records=b"")]
    )
    return {
        "Metadata": controller_pb2.MetadataRequest(topics=[MATRIX_TOPIC]),
        "Produce": produce,
        "ProduceStream": produce,
        "Fetch": fetch,
        "FetchStream": fetch,
        "ListOffsets": storage_pb2.ListOffsetsRequest(
            replica_id=-1, partitions=[storage_pb2.ListOffsetsPartition(**part, spec=2)]
        ),
        "OffsetForLeaderEpoch": storage_pb2.OffsetForLeaderEpochRequest(
            replica_id=-1, partitions=[storage_pb2.OffsetForLeaderEpochPartition(**part)]
        ),
        "DeleteRecords": storage_pb2.DeleteRecordsRequest(
            partitions=[storage_pb2.DeleteRecordsPartition(**part, offset=0)]
        ),
        "ProduceRecords": gateway_pb2.ProduceRecordsRequest(
            topic=MATRIX_TOPIC, records=[gateway_pb2.Record(value=b"m")]
        ),
        "FetchRecords": gateway_pb2.FetchRecordsRequest(topic=MATRIX_TOPIC, max_records=1),
        "CreateTopics": controller_pb2.CreateTopicsRequest(
            topics=[
                controller_pb2.NewTopic(name="matrix-new", num_partitions=1, replication_factor=1)
            ],
            validate_only=True,
        ),
        "DeleteTopics": controller_pb2.DeleteTopicsRequest(names=["matrix-absent"]),
        "CreatePartitions": controller_pb2.CreatePartitionsRequest(
            topics=[controller_pb2.CreatePartitionsTopic(name=MATRIX_TOPIC, count=1)],
            validate_only=True,
        ),
        "DescribeConfigs": controller_pb2.DescribeConfigsRequest(
            resources=[controller_pb2.ConfigResource(type=2, name=MATRIX_TOPIC)]
        ),
        "IncrementalAlterConfigs": controller_pb2.IncrementalAlterConfigsRequest(
            resources=[controller_pb2.AlterConfigsResource(type=2, name=MATRIX_TOPIC)],
            validate_only=True,
        ),
        "ElectLeaders": controller_pb2.ElectLeadersRequest(
            partitions=[common_pb2.TopicPartition(**part)]
        ),
        "AlterPartitionReassignments": controller_pb2.AlterPartitionReassignmentsRequest(),
        "ListPartitionReassignments": controller_pb2.ListPartitionReassignmentsRequest(),
        "DescribeLogDirs": storage_pb2.DescribeLogDirsRequest(topics=[MATRIX_TOPIC]),
        "InitProducerId": controller_pb2.InitProducerIdRequest(),
        "FindCoordinator": coordinator_pb2.FindCoordinatorRequest(group_id=group),
        "JoinGroup": coordinator_pb2.JoinGroupRequest(
            group_id=group,
            session_timeout_ms=10000,
            rebalance_timeout_ms=10000,
            protocol_type="consumer",
        ),
        "SyncGroup": coordinator_pb2.SyncGroupRequest(group_id=group, member_id="nobody"),
        "Heartbeat": coordinator_pb2.HeartbeatRequest(group_id=group, member_id="nobody"),
        "LeaveGroup": coordinator_pb2.LeaveGroupRequest(group_id=group),
        "OffsetCommit": coordinator_pb2.OffsetCommitRequest(
            group_id=group,
            generation_id=-1,
            partitions=[coordinator_pb2.OffsetCommitPartition(**part)],
        ),
        "OffsetFetch": coordinator_pb2.OffsetFetchRequest(group_id=group),
        "OffsetDelete": coordinator_pb2.OffsetDeleteRequest(
            group_id=group, partitions=[common_pb2.TopicPartition(**part)]
        ),
        "ListGroups": coordinator_pb2.ListGroupsRequest(),
        "DescribeGroups": coordinator_pb2.DescribeGroupsRequest(group_ids=[group]),
        "DeleteGroups": coordinator_pb2.DeleteGroupsRequest(group_ids=["matrix-absent-group"]),
        "TxnOffsetCommit": coordinator_pb2.TxnOffsetCommitRequest(
            transactional_id=txn,
            group_id=group,
            producer_id=-1,
            partitions=[coordinator_pb2.OffsetCommitPartition(**part)],
        ),
        "AddPartitionsToTxn": transaction_pb2.AddPartitionsToTxnRequest(
            transactional_id=txn, producer_id=-1, partitions=[common_pb2.TopicPartition(**part)]
        ),
        "AddOffsetsToTxn": transaction_pb2.AddOffsetsToTxnRequest(
            transactional_id=txn, producer_id=-1, group_id=group
        ),
        "EndTxn": transaction_pb2.EndTxnRequest(transactional_id=txn, producer_id=-1),
        "ListTransactions": transaction_pb2.ListTransactionsRequest(),
        "DescribeTransactions": transaction_pb2.DescribeTransactionsRequest(
            transactional_ids=[txn]
        ),
        "CommitStagedTransactions": transaction_pb2.CommitStagedTransactionsRequest(
            commit_id="matrix-commit",
            members=[transaction_pb2.StagedTransaction(transactional_id=txn, producer_id=-1)],
        ),
        "DescribeStagedCommit": transaction_pb2.DescribeStagedCommitRequest(commit_id="matrix"),
        "DescribeProducers": transaction_pb2.DescribeProducersRequest(
            partitions=[common_pb2.TopicPartition(**part)]
        ),
        "AlterUserScramCredentials": security_pb2.AlterUserScramCredentialsRequest(),
        "DescribeUserScramCredentials": security_pb2.DescribeUserScramCredentialsRequest(),
        "CreateAcls": security_pb2.CreateAclsRequest(),
        "DeleteAcls": security_pb2.DeleteAclsRequest(),
        "DescribeAcls": security_pb2.DescribeAclsRequest(),
    }


#: Answers cut to what the caller may describe instead of refused: a refused caller sees none
#: of the matrix resources.
FILTERED = {"Metadata", "ListGroups", "ListTransactions"}


def _services(cluster: SecureCluster) -> dict[str, list[Any]]:
    """The public services each kind of process serves (proto descriptors), by address: a
    client may dial any of them."""
    return {
        cluster.gateway: [gateway_pb2.DESCRIPTOR.services_by_name["Gateway"],
                          security_pb2.DESCRIPTOR.services_by_name["Security"]],
        cluster.storage_address(1): [storage_pb2.DESCRIPTOR.services_by_name["StorageNode"]],
        cluster.spec.controller_address(1): [
            controller_pb2.DESCRIPTOR.services_by_name["Controller"]
        ],
        cluster.coordinator_address(1): [
            coordinator_pb2.DESCRIPTOR.services_by_name["GroupCoordinator"],
            transaction_pb2.DESCRIPTOR.services_by_name["TransactionCoordinator"],
        ],
    }  # fmt: skip


def _refused_in_answer(method: str, response: Any) -> bool:
    """Whether a filtered answer hides the matrix resources (or refuses the named topic)."""
    if method == "Metadata":
        (topic,) = response.topics
        return bool(topic.error_code == common_pb2.TOPIC_AUTHORIZATION_FAILED)
    entries = response.groups if method == "ListGroups" else response.transactions
    return not any("matrix" in str(entry) for entry in entries)


async def _matrix(cluster: SecureCluster) -> list[str]:
    requests = _requests()
    admin_password = secure.admin_options(cluster.spec.data_dir)["sasl_plain_password"]
    logins = {
        "no credentials": None,
        "wrong password": ("bob", "not-bobs"),
        "no acl": ("carol", "carol-secret"),
        "deny acl": ("dave", "dave-secret"),
        "allow acl": ("bob", "bob-secret"),
        "super user": ("admin", admin_password),
    }
    securities = {
        who: ChannelSecurity(
            "SASL_SSL",
            cafile=cluster.cafile,
            tokens=None
            if login is None
            else ScramLogin(SecurityConfig(**cluster.options(*login)), [cluster.gateway]),
        )
        for who, login in logins.items()
    }
    failures: list[str] = []
    for address, services in _services(cluster).items():
        channels = {who: security.channel(address) for who, security in securities.items()}
        try:
            for service in services:
                for method in service.methods:
                    path = f"/{service.full_name}/{method.name}"
                    if path in PUBLIC_METHODS or method.name in INTERNAL_METHODS:
                        continue
                    if method.name not in requests:
                        failures.append(f"{path}: no request in the deny matrix")
                        continue
                    reply = message_factory.GetMessageClass(method.output_type).FromString
                    for who in CALLERS:
                        error = await _call(channels[who], path, method, requests[method.name],
                                            reply, address=address)  # fmt: skip
                        if not _expected(who, method.name, error):
                            failures.append(f"{path} as {who}: {error!r}")
        finally:
            for channel in channels.values():
                await channel.close()
    return failures


async def _call(
    channel: Any, path: str, method: Any, request: Any, reply: Any, *, address: str
) -> Any:
    """The error of one call, a refusal in a filtered answer, or the answer."""
    serialize = type(request).SerializeToString
    try:
        with translate_errors(address):
            if method.client_streaming:
                call = channel.stream_stream(path, serialize, reply)(timeout=20)
                await call.write(request)
                response = await call.read()
                call.cancel()
            else:
                response = await channel.unary_unary(path, serialize, reply)(request, timeout=20)
    except StromError as exc:
        return exc
    if method.name in FILTERED and _refused_in_answer(method.name, response):
        return TopicAuthorizationFailedError("(filtered out)")
    return _refused_entry(response) or response


_AUTHORIZATION_CODES = {
    common_pb2.TOPIC_AUTHORIZATION_FAILED,
    common_pb2.GROUP_AUTHORIZATION_FAILED,
    common_pb2.CLUSTER_AUTHORIZATION_FAILED,
    common_pb2.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
}


def _refused_entry(response: Any) -> StromError | None:
    """The authorization failure an answer carries in an entry (a stream's request is
    answered per entry, a refused one included)."""
    for field in response.DESCRIPTOR.fields:
        if field.message_type is None or not field.is_repeated:
            continue
        for entry in getattr(response, field.name):
            code = getattr(entry, "error_code", 0)
            if code in _AUTHORIZATION_CODES:
                return for_code(code, getattr(entry, "error_message", ""))
    return None


def _expected(who: str, method: str, error: Any) -> bool:
    if who in ("no credentials", "wrong password"):
        return isinstance(error, SaslAuthenticationFailedError)
    if who in ("no acl", "deny acl"):
        return isinstance(error, AuthorizationFailedError)
    return not isinstance(error, AuthorizationFailedError | SaslAuthenticationFailedError)


def test_deny_matrix(cluster: SecureCluster) -> None:
    """Every public RPC of every service (from the proto descriptors) by every kind of caller,
    at the gateway and dialed directly at a storage node, a controller and a coordinator."""
    with cluster.admin() as admin:
        admin.create_topics([NewTopic(MATRIX_TOPIC, 1, 1)])
    # the group and the transactional id the list calls must show (or hide)
    with Producer(cluster.gateway, transactional_id="matrix-txn", **cluster.options()) as producer:
        producer.init_transactions()
    with Admin(cluster.gateway, **cluster.options()) as admin:
        admin.alter_consumer_group_offsets("matrix-group", {TopicPartition(MATRIX_TOPIC, 0): 0})
    for user in ("bob", "carol", "dave"):
        cluster.add_user(user, f"{user}-secret")
    everything = [
        AclBinding.create(rtype, "*", principal, "ALL", permission)
        for rtype in ("TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID")
        for principal, permission in (("User:bob", "ALLOW"), ("User:dave", "ALLOW"),
                                      ("User:dave", "DENY"))
    ]  # fmt: skip
    cluster.allow(*everything)
    failures = asyncio.run(_matrix(cluster))
    assert not failures, "\n".join(failures)


# -- storage nodes, revocation, groups --------------------------------------------------------


def test_storage_node_refuses_a_topic_the_user_may_not_read(cluster: SecureCluster) -> None:
    """erin may read topic A only; dialing the leader of B directly is refused."""
    with cluster.admin() as admin:
        admin.create_topics([NewTopic("erin-a", 1, 1), NewTopic("erin-b", 1, 1)])
        (b,) = admin.describe_topics(["erin-b"])
    cluster.add_user("erin", "erin-secret")
    cluster.allow(AclBinding.create("TOPIC", "erin-a", "User:erin", "READ"))
    leader = b.partitions[0].leader
    tokens = ScramLogin(SecurityConfig(**cluster.options("erin", "erin-secret")), [cluster.gateway])
    security = ChannelSecurity("SASL_SSL", cafile=cluster.cafile, tokens=tokens)

    async def fetch(topic: str) -> Any:
        channel = security.channel(cluster.storage_address(leader))
        try:
            with translate_errors("storage"):
                return await storage_pb2_grpc.StorageNodeStub(channel).Fetch(
                    storage_pb2.FetchRequest(
                        replica_id=-1,
                        max_bytes=1024,
                        partitions=[storage_pb2.FetchPartition(topic=topic, partition=0)],
                    ),
                    timeout=20,
                )
        finally:
            await channel.close()

    with pytest.raises(TopicAuthorizationFailedError):
        asyncio.run(fetch("erin-b"))
    # A replica fetch (CLUSTER_ACTION) is refused to a user too.
    with pytest.raises(AuthorizationFailedError):
        asyncio.run(fetch_as_replica(security, cluster.storage_address(leader)))


async def fetch_as_replica(security: ChannelSecurity, address: str) -> Any:
    channel = security.channel(address)
    try:
        with translate_errors("storage"):
            return await storage_pb2_grpc.StorageNodeStub(channel).Fetch(
                storage_pb2.FetchRequest(
                    replica_id=1,
                    max_bytes=1024,
                    partitions=[storage_pb2.FetchPartition(topic="erin-a", partition=0)],
                ),
                timeout=20,
            )
    finally:
        await channel.close()


def test_group_needs_read_on_group_and_topic_and_a_revoked_acl_stops_reads(
    cluster: SecureCluster,
) -> None:
    with cluster.admin() as admin:
        admin.create_topics([NewTopic("frank-t", 1, 1)])
    cluster.add_user("frank", "frank-secret")
    topic_read = AclBinding.create("TOPIC", "frank-t", "User:frank", "READ")
    cluster.allow(topic_read)
    tokens = ScramLogin(
        SecurityConfig(**cluster.options("frank", "frank-secret")), [cluster.gateway]
    )
    security = ChannelSecurity("SASL_SSL", cafile=cluster.cafile, tokens=tokens)

    async def call(method: str, request: Any) -> Any:
        channel = security.channel(cluster.gateway)
        try:
            with translate_errors("gateway"):
                stub = gateway_pb2_grpc.GatewayStub(channel)
                return await getattr(stub, method)(request, timeout=20)
        finally:
            await channel.close()

    join = coordinator_pb2.JoinGroupRequest(
        group_id="frank-g",
        session_timeout_ms=10000,
        rebalance_timeout_ms=10000,
        protocol_type="consumer",
        protocols=[coordinator_pb2.GroupProtocol(name="range", metadata=b"")],
    )
    with pytest.raises(GroupAuthorizationFailedError):
        asyncio.run(call("JoinGroup", join))
    commit = coordinator_pb2.OffsetCommitRequest(
        group_id="frank-g",
        generation_id=-1,
        partitions=[coordinator_pb2.OffsetCommitPartition(topic="frank-other", partition=0)],
    )
    cluster.allow(AclBinding.create("GROUP", "frank-g", "User:frank", "READ"))
    # READ on the group now, but not on the topic of the commit.
    with pytest.raises(TopicAuthorizationFailedError):
        asyncio.run(call("OffsetCommit", commit))
    fetch = storage_pb2.FetchRequest(
        replica_id=-1,
        max_bytes=1024,
        partitions=[storage_pb2.FetchPartition(topic="frank-t", partition=0)],
    )
    asyncio.run(call("Fetch", fetch))  # allowed
    cluster.revoke(topic_read)

    def refused() -> bool:
        try:
            asyncio.run(call("Fetch", fetch))
        except TopicAuthorizationFailedError:
            return True
        return False

    wait_until(refused, 30, "the revoked ACL to take effect")


def test_a_consumer_needs_read_on_group_and_topic_and_stops_when_revoked(
    cluster: SecureCluster,
) -> None:
    with cluster.admin() as admin:
        admin.create_topics([NewTopic("gina-t", 1, 1)])
    with Producer(cluster.gateway, **cluster.options()) as producer:
        for i in range(5):
            producer.send("gina-t", f"v{i}".encode())
        producer.flush(30)
    cluster.add_user("gina", "gina-secret")
    topic_read = AclBinding.create("TOPIC", "gina-t", "User:gina", "READ")
    cluster.allow(topic_read)
    options = {
        "bootstrap_servers": cluster.gateway,
        "group_id": "gina-g",
        "auto_offset_reset": "earliest",
        **cluster.options("gina", "gina-secret"),
    }

    def poll_until_raises(consumer: Consumer, error: type[Exception]) -> None:
        def raised() -> bool:
            try:
                consumer.poll(timeout_ms=200)
            except error:
                return True
            return False

        wait_until(raised, 30, f"poll to raise {error.__name__}")

    with Consumer("gina-t", **options) as consumer:  # READ on the topic only
        poll_until_raises(consumer, GroupAuthorizationFailedError)
    cluster.allow(AclBinding.create("GROUP", "gina-g", "User:gina", "READ"))
    with Consumer("gina-t", **options) as consumer:
        seen: list[bytes] = []

        def read_all() -> bool:
            for records in consumer.poll(timeout_ms=300).values():
                seen.extend(r.value or b"" for r in records)
            return len(seen) >= 5

        wait_until(read_all, 60, "gina's consumer reads the topic")
        cluster.revoke(topic_read)
        poll_until_raises(consumer, TopicAuthorizationFailedError)


def test_a_consumer_of_a_topic_it_may_not_describe_or_read_raises_from_poll(
    cluster: SecureCluster,
) -> None:
    """assign() of a topic the user may not DESCRIBE (the metadata refuses it), of one it may
    describe but not READ (the Fetch refuses it), and subscriptions naming such topics: poll
    raises TopicAuthorizationFailedError (sync and asyncio consumers), as Kafka's does."""
    with cluster.admin() as admin:
        admin.create_topics([NewTopic(t, 2, 1) for t in ("ida-hidden", "ida-noread", "ida-ok")])
    cluster.add_user("ida", "ida-secret")
    cluster.allow(
        AclBinding.create("TOPIC", "ida-noread", "User:ida", "DESCRIBE"),
        AclBinding.create("TOPIC", "ida-ok", "User:ida", "READ"),
        AclBinding.create("GROUP", "ida-g", "User:ida", "READ"),
    )
    options: dict[str, Any] = {
        "bootstrap_servers": cluster.gateway,
        "auto_offset_reset": "earliest",
        **cluster.options("ida", "ida-secret"),
    }

    def raises(consumer: Consumer, refused: str) -> None:
        deadline = time.monotonic() + 30
        while True:
            assert time.monotonic() < deadline, f"poll never refused {refused}"
            try:
                consumer.poll(timeout_ms=500)
            except TopicAuthorizationFailedError as exc:
                assert refused in str(exc) and exc.unauthorized_topics <= {refused}
                return

    for topic in ("ida-hidden", "ida-noread"):
        with Consumer(**options) as consumer:
            consumer.assign([TopicPartition(topic, 0), TopicPartition("ida-ok", 0)])
            raises(consumer, topic)
            raises(consumer, topic)  # again on a later poll, not once only
    with Consumer(**options) as consumer:  # a pattern matches the describable topics
        consumer.subscribe(pattern="ida-.*")
        raises(consumer, "ida-noread")
    for subscribed in (["ida-hidden", "ida-ok"], "ida-.*"):
        with Consumer(**options, group_id="ida-g") as consumer:
            if isinstance(subscribed, str):
                consumer.subscribe(pattern=subscribed)
            else:
                consumer.subscribe(subscribed)
            raises(consumer, "ida-noread" if isinstance(subscribed, str) else "ida-hidden")

    async def aio_assign() -> None:
        async with AsyncConsumer(**options) as consumer:
            consumer.assign([TopicPartition("ida-hidden", 1)])
            with pytest.raises(TopicAuthorizationFailedError, match="ida-hidden-1"):
                async with asyncio.timeout(30):
                    while True:
                        await consumer.poll(timeout_ms=500)
            with pytest.raises(TopicAuthorizationFailedError):
                async with asyncio.timeout(30):
                    await consumer.position(TopicPartition("ida-hidden", 1))

    asyncio.run(aio_assign())


def test_transactions_need_write_on_the_transactional_id(cluster: SecureCluster) -> None:
    with cluster.admin() as admin:
        admin.create_topics([NewTopic("hank-t", 1, 1)])
    cluster.add_user("hank", "hank-secret")
    cluster.allow(
        AclBinding.create("TOPIC", "hank-t", "User:hank", "WRITE"),
        AclBinding.create("TRANSACTIONAL_ID", "hank-", "User:hank", "WRITE",
                          pattern_type="PREFIXED"),
    )  # fmt: skip
    options = cluster.options("hank", "hank-secret")
    with (
        Producer(cluster.gateway, transactional_id="other-1", **options) as producer,
        pytest.raises(TransactionalIdAuthorizationFailedError),
    ):
        producer.init_transactions()
    with Producer(cluster.gateway, transactional_id="hank-1", **options) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send("hank-t", b"in a transaction")
        producer.commit_transaction()


def test_cli_users_acls_and_command_config(cluster: SecureCluster, tmp_path: Path) -> None:
    admin = ("--bootstrap-server", cluster.gateway, "--command-config",
             str(secure.admin_properties_path(cluster.spec.data_dir)))  # fmt: skip
    assert_ok(run_strom("users", "create", "ivan", "--password", "ivan-secret", *admin))
    with cluster.admin() as admin_client:
        assert "ivan" in admin_client.describe_scram_users()
        admin_client.create_topics([NewTopic("ivan-t", 1, 1)])
    assert_ok(
        run_strom("acls", "add", "--allow-principal", "User:ivan", "--operation", "Describe",
                  "--topic", "ivan-", "--resource-pattern-type", "prefixed", *admin)
    )  # fmt: skip
    listed = assert_ok(run_strom("acls", "list", "--principal", "User:ivan", "--json", *admin))
    assert [(a["resource_name"], a["operation"]) for a in listed.json()] == [("ivan-", "DESCRIBE")]
    ivan = tmp_path / "ivan.properties"
    ivan.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\nsasl.username=ivan\n"
        f"sasl.password=ivan-secret\nssl.cafile={cluster.cafile}\n"
    )
    mine = ("--bootstrap-server", cluster.gateway, "--command-config", str(ivan))
    assert assert_ok(run_strom("topics", "list", *mine)).stdout.split() == ["ivan-t"]
    assert_one_line_error(
        run_strom("topics", "delete", "ivan-t", *mine), "TOPIC_AUTHORIZATION_FAILED"
    )
    ivan.write_text(ivan.read_text().replace("ivan-secret", "wrong"))
    assert_one_line_error(run_strom("topics", "list", *mine), "SASL_AUTHENTICATION_FAILED")


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_node_client_logs_in_and_sees_only_its_topics(cluster: SecureCluster) -> None:
    node_dir = Path(__file__).resolve().parents[3] / "clients" / "node"
    if not (node_dir / "node_modules" / "@grpc" / "grpc-js").is_dir():
        pytest.fail(f"run `npm ci` in {node_dir} first (make test does)")
    with cluster.admin() as admin:
        admin.create_topics([NewTopic("jill-t", 1, 1)])
    cluster.add_user("jill", "jill-secret")
    cluster.allow(AclBinding.create("TOPIC", "jill-t", "User:jill", "DESCRIBE"))
    script = (
        "const {StromGateway} = require('./src/index');"
        f"const g = new StromGateway({cluster.gateway!r}, {{security: {{"
        "securityProtocol: 'SASL_SSL', saslMechanism: 'SCRAM-SHA-256',"
        f"saslPlainUsername: process.argv[1], saslPlainPassword: process.argv[2],"
        f"sslCafile: {cluster.cafile!r}}}}});"
        "g.metadata().then((m) => { console.log(JSON.stringify(m.topics.map((t) => t.name)));"
        " g.close(); }, (e) => { console.log(JSON.stringify({error: e.details})); g.close(); });"
    )

    def run(user: str, password: str) -> Any:
        done = subprocess.run(
            ["node", "-e", script, user, password],
            cwd=node_dir, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    assert run("jill", "jill-secret") == ["jill-t"]
    assert "SASL_AUTHENTICATION_FAILED" in run("jill", "wrong")["error"]


# -- per-entry answers, streams ---------------------------------------------------------------


def _user_security(cluster: SecureCluster, user: str) -> ChannelSecurity:
    cluster.add_user(user, f"{user}-secret")
    login = ScramLogin(SecurityConfig(**cluster.options(user, f"{user}-secret")), [cluster.gateway])
    return ChannelSecurity("SASL_SSL", cafile=cluster.cafile, tokens=login)


def test_a_request_naming_an_allowed_and_a_refused_topic_is_answered_per_entry(
    cluster: SecureCluster,
) -> None:
    """Kim may write and read kim-a only: a Produce, a Fetch (at the gateway and at the
    storage node), a ListOffsets and an OffsetCommit naming kim-a and kim-b succeed for kim-a
    and answer kim-b TOPIC_AUTHORIZATION_FAILED; so does a DeleteTopics of kim-c (which kim
    may delete) and kim-b."""
    with cluster.admin() as admin:
        admin.create_topics([NewTopic(f"kim-{t}", 1, 1) for t in "abc"])
        (a,) = admin.describe_topics(["kim-a"])
    security = _user_security(cluster, "kim")
    cluster.allow(
        *(AclBinding.create("TOPIC", "kim-a", "User:kim", op) for op in ("WRITE", "READ")),
        AclBinding.create("GROUP", "kim-g", "User:kim", "READ"),
        AclBinding.create("TOPIC", "kim-c", "User:kim", "DELETE"),
    )
    denied = common_pb2.TOPIC_AUTHORIZATION_FAILED
    batch = encode_batch([(0, None, b"kim")])
    both = [{"topic": "kim-a", "partition": 0}, {"topic": "kim-b", "partition": 0}]
    produce = storage_pb2.ProduceRequest(
        acks=1, partitions=[storage_pb2.ProducePartitionData(**p, records=batch) for p in both]
    )
    fetch = storage_pb2.FetchRequest(
        replica_id=-1, max_bytes=1 << 20, partitions=[storage_pb2.FetchPartition(**p) for p in both]
    )

    async def scenario() -> None:
        gateway = security.channel(cluster.gateway)
        storage = security.channel(cluster.storage_address(a.partitions[0].leader))
        try:
            stub = gateway_pb2_grpc.GatewayStub(gateway)
            answers = {r.topic: r for r in (await stub.Produce(produce, timeout=20)).partitions}
            assert (answers["kim-a"].error_code, answers["kim-b"].error_code) == (0, denied)
            for fetcher in (stub, storage_pb2_grpc.StorageNodeStub(storage)):
                results = (await fetcher.Fetch(fetch, timeout=20)).partitions
                answers = {r.topic: r for r in results}
                assert answers["kim-a"].error_code == 0 and answers["kim-a"].records
                assert answers["kim-b"].error_code == denied
                assert "may not READ TOPIC 'kim-b'" in answers["kim-b"].error_message
            offsets = await stub.ListOffsets(
                storage_pb2.ListOffsetsRequest(
                    replica_id=-1,
                    partitions=[storage_pb2.ListOffsetsPartition(**p, spec=2) for p in both],
                ),
                timeout=20,
            )
            assert {r.topic: r.error_code for r in offsets.partitions} == {
                "kim-a": 0,
                "kim-b": denied,
            }
            commit = await stub.OffsetCommit(
                coordinator_pb2.OffsetCommitRequest(
                    group_id="kim-g",
                    generation_id=-1,
                    partitions=[coordinator_pb2.OffsetCommitPartition(**p) for p in both],
                ),
                timeout=20,
            )
            assert {r.topic: r.error_code for r in commit.partitions} == {
                "kim-a": 0,
                "kim-b": denied,
            }
            # a stream's requests: answered per entry, one refused whole included, in order
            only_b = storage_pb2.ProduceRequest(acks=1, partitions=[produce.partitions[1]])
            for streamer in (stub, storage_pb2_grpc.StorageNodeStub(storage)):
                call = streamer.ProduceStream(timeout=20)
                for number, sent in enumerate((produce, only_b, produce), 1):
                    sent.correlation_id = number
                    await call.write(sent)
                for number, expected in enumerate(({"kim-a": 0, "kim-b": denied},
                                                   {"kim-b": denied},
                                                   {"kim-a": 0, "kim-b": denied}), 1):  # fmt: skip
                    answer = await call.read()
                    assert answer.correlation_id == number
                    assert {r.topic: r.error_code for r in answer.partitions} == expected
                await call.done_writing()
            deleted = await stub.DeleteTopics(
                controller_pb2.DeleteTopicsRequest(names=["kim-c", "kim-b"]), timeout=20
            )
            assert {t.name: t.error_code for t in deleted.topics} == {
                "kim-c": 0,
                "kim-b": denied,
            }
        finally:
            await gateway.close()
            await storage.close()

    with translate_errors("kim"):
        asyncio.run(scenario())
    # every refused entry is in the audit log of the service that refused it
    leader = f"storage-{a.partitions[0].leader}"
    wanted = {("gateway", "WRITE", "Produce"), ("gateway", "READ", "Fetch"),
              (leader, "READ", "Fetch"), ("gateway", "DELETE", "DeleteTopics")}  # fmt: skip

    def audited() -> bool:
        return wanted <= {
            (name, line["operation"], line["rpc"].rpartition("/")[2])
            for name in ("gateway", leader)
            for line in _audit_lines(cluster, name)
            if line["event"] == "denied"
            and (line["principal"], line["resource"]) == ("User:kim", "kim-b")
        }

    wait_until(audited, 30, "the audit log's denials of kim-b")


def test_transaction_and_config_requests_naming_a_refused_topic_answer_per_entry(
    cluster: SecureCluster,
) -> None:
    """Ivy may write ivy-a and alter its configs, not ivy-b's: an AddPartitionsToTxn of both
    adds neither (ivy-b TOPIC_AUTHORIZATION_FAILED, ivy-a OPERATION_NOT_ATTEMPTED, as Kafka);
    a DescribeConfigs and an IncrementalAlterConfigs of both serve ivy-a and refuse ivy-b."""
    with cluster.admin() as admin:
        admin.create_topics([NewTopic(f"ivy-{t}", 1, 1) for t in "ab"])
    security = _user_security(cluster, "ivy")
    cluster.allow(
        *(AclBinding.create("TOPIC", "ivy-a", "User:ivy", op) for op in ("WRITE", "ALTER_CONFIGS")),
        AclBinding.create("TRANSACTIONAL_ID", "ivy-tx", "User:ivy", "WRITE"),
    )
    denied = common_pb2.TOPIC_AUTHORIZATION_FAILED
    topic = controller_pb2.RESOURCE_TOPIC

    async def scenario() -> None:
        channel = security.channel(cluster.gateway)
        try:
            stub = gateway_pb2_grpc.GatewayStub(channel)
            producer = await stub.InitProducerId(
                controller_pb2.InitProducerIdRequest(
                    transactional_id="ivy-tx", transaction_timeout_ms=60000
                ),
                timeout=20,
            )
            assert producer.error_code == 0
            add = transaction_pb2.AddPartitionsToTxnRequest(
                transactional_id="ivy-tx",
                producer_id=producer.producer_id,
                producer_epoch=producer.producer_epoch,
                partitions=[common_pb2.TopicPartition(topic=t, partition=0)
                            for t in ("ivy-a", "ivy-b")],
            )  # fmt: skip
            added = await stub.AddPartitionsToTxn(add, timeout=20)
            assert {r.topic: r.error_code for r in added.results} == {
                "ivy-a": common_pb2.OPERATION_NOT_ATTEMPTED,
                "ivy-b": denied,
            }
            described = await stub.DescribeTransactions(
                transaction_pb2.DescribeTransactionsRequest(transactional_ids=["ivy-tx"]),
                timeout=20,
            )
            assert not described.transactions or not described.transactions[0].partitions
            del add.partitions[1:]
            added = await stub.AddPartitionsToTxn(add, timeout=20)  # ivy-a alone: added
            assert [(r.topic, r.error_code) for r in added.results] == [("ivy-a", 0)]
            resources = [controller_pb2.ConfigResource(type=topic, name=t)
                         for t in ("ivy-b", "ivy-a")]  # fmt: skip
            configs = await stub.DescribeConfigs(
                controller_pb2.DescribeConfigsRequest(resources=resources), timeout=20
            )
            results = {r.name: r for r in configs.results}
            assert results["ivy-a"].error_code == 0 and results["ivy-a"].configs
            assert results["ivy-b"].error_code == denied and not results["ivy-b"].configs
            op = controller_pb2.AlterConfigOp(name="retention.ms", value="4321000")
            altered = await stub.IncrementalAlterConfigs(
                controller_pb2.IncrementalAlterConfigsRequest(
                    resources=[controller_pb2.AlterConfigsResource(type=topic, name=t, ops=[op])
                               for t in ("ivy-a", "ivy-b")]
                ),
                timeout=20,
            )  # fmt: skip
            assert {r.name: r.error_code for r in altered.results} == {"ivy-a": 0, "ivy-b": denied}
        finally:
            await channel.close()

    with translate_errors("ivy"):
        asyncio.run(scenario())
    with cluster.admin() as admin:
        assert admin.describe_configs("ivy-a")["retention.ms"].value == "4321000"
        assert admin.describe_configs("ivy-b")["retention.ms"].value != "4321000"


def _audit_lines(cluster: SecureCluster, process: str) -> list[dict[str, Any]]:
    """The ``strom.audit`` events in a process's log."""
    lines = []
    log = Path(cluster.spec.data_dir) / "logs" / f"{process}.log"
    for text in log.read_text(errors="replace").splitlines():
        if '"strom.audit"' in text:
            lines.append(json.loads(text))
    return lines


def test_a_revoked_acl_refuses_a_running_streaming_fetch(
    cluster: SecureCluster,
) -> None:
    """Lee fetches over a FetchStream from the leader; after READ is revoked, the next fetch
    once the change reached the node is answered TOPIC_AUTHORIZATION_FAILED (the stream goes
    on, as a Kafka connection does)."""
    with cluster.admin() as admin:
        admin.create_topics([NewTopic("lee-t", 1, 1)])
        (topic,) = admin.describe_topics(["lee-t"])
    security = _user_security(cluster, "lee")
    read = AclBinding.create("TOPIC", "lee-t", "User:lee", "READ")
    cluster.allow(read)
    request = storage_pb2.FetchRequest(
        replica_id=-1,
        max_wait_ms=50,
        max_bytes=1024,
        partitions=[storage_pb2.FetchPartition(topic="lee-t", partition=0)],
    )

    async def scenario() -> float:
        channel = security.channel(cluster.storage_address(topic.partitions[0].leader))
        loop = asyncio.get_running_loop()
        try:
            call = storage_pb2_grpc.StorageNodeStub(channel).FetchStream(timeout=60)
            await call.write(request)
            assert (await call.read()).partitions[0].error_code == 0
            revoked_at = loop.time()
            await asyncio.to_thread(cluster.revoke, read)
            with translate_errors("storage"):
                while True:  # a consumer's stream: one fetch after the other
                    await call.write(request)
                    (answer,) = (await call.read()).partitions
                    if answer.error_code:
                        break
                took = loop.time() - revoked_at
                assert answer.error_code == common_pb2.TOPIC_AUTHORIZATION_FAILED
                await call.write(request)
                (again,) = (await call.read()).partitions
                assert again.error_code == common_pb2.TOPIC_AUTHORIZATION_FAILED
            return took
        finally:
            await channel.close()

    took = asyncio.run(scenario())
    print(f"the streaming fetch was refused {took:.2f} s after the revocation was sent")

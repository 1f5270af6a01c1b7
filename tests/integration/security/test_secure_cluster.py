"""A secure cluster end to end: logins, the deny matrix over the public RPCs, direct storage
access, a revoked ACL stopping a running consumer, groups needing READ on group and topic."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from cluster_testkit import assert_ok, assert_one_line_error, run_strom
from security_testkit import SecureCluster
from strom_testkit import wait_until

from strom import Admin, Consumer, Producer
from strom.cluster import translate_errors
from strom.cluster.login import ScramLogin
from strom.errors import (
    AuthorizationFailedError,
    GroupAuthorizationFailedError,
    SaslAuthenticationFailedError,
    StromError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
)
from strom.protocol.v1 import (
    common_pb2,
    controller_pb2,
    coordinator_pb2,
    gateway_pb2,
    gateway_pb2_grpc,
    storage_pb2,
    storage_pb2_grpc,
    transaction_pb2,
)
from strom.security import ChannelSecurity, SecurityConfig
from strom.security.acl import AclBinding
from strom.types import NewTopic
from strom_server.local import secure


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


def _requests() -> dict[str, Any]:
    """One request per public Gateway RPC (unary ones), naming the matrix resources."""
    part = {"topic": MATRIX_TOPIC, "partition": 0}
    return {
        "Metadata": controller_pb2.MetadataRequest(topics=[MATRIX_TOPIC]),
        "Fetch": storage_pb2.FetchRequest(
            replica_id=-1, max_bytes=1024, partitions=[storage_pb2.FetchPartition(**part)]
        ),
        "ListOffsets": storage_pb2.ListOffsetsRequest(
            replica_id=-1, partitions=[storage_pb2.ListOffsetsPartition(**part, spec=2)]
        ),
        "DeleteRecords": storage_pb2.DeleteRecordsRequest(
            partitions=[storage_pb2.DeleteRecordsPartition(**part, offset=0)]
        ),
        "FetchRecords": gateway_pb2.FetchRecordsRequest(topic=MATRIX_TOPIC, max_records=1),
        "CreateTopics": controller_pb2.CreateTopicsRequest(
            topics=[
                controller_pb2.NewTopic(name="matrix-new", num_partitions=1, replication_factor=1)
            ],
            validate_only=True,
        ),
        "DeleteTopics": controller_pb2.DeleteTopicsRequest(names=["matrix-absent"]),
        "DescribeConfigs": controller_pb2.DescribeConfigsRequest(
            resources=[controller_pb2.ConfigResource(type=2, name=MATRIX_TOPIC)]
        ),
        "ElectLeaders": controller_pb2.ElectLeadersRequest(
            partitions=[common_pb2.TopicPartition(**part)]
        ),
        "ListPartitionReassignments": controller_pb2.ListPartitionReassignmentsRequest(),
        "DescribeLogDirs": storage_pb2.DescribeLogDirsRequest(topics=[MATRIX_TOPIC]),
        "InitProducerId": controller_pb2.InitProducerIdRequest(),
        "FindCoordinator": coordinator_pb2.FindCoordinatorRequest(group_id="matrix-group"),
        "OffsetFetch": coordinator_pb2.OffsetFetchRequest(group_id="matrix-group"),
        "DescribeGroups": coordinator_pb2.DescribeGroupsRequest(group_ids=["matrix-group"]),
        "DeleteGroups": coordinator_pb2.DeleteGroupsRequest(group_ids=["matrix-group"]),
        "DescribeTransactions": transaction_pb2.DescribeTransactionsRequest(
            transactional_ids=["matrix-txn"]
        ),
        "DescribeProducers": transaction_pb2.DescribeProducersRequest(
            partitions=[common_pb2.TopicPartition(**part)]
        ),
    }


FILTERED = {"Metadata"}
_LOGINS: dict[tuple[str, str], ScramLogin] = {}


def _call(cluster: SecureCluster, who: str, method: str, request: Any) -> BaseException | None:
    options = {
        "no credentials": None,
        "wrong password": ("bob", "not-bobs"),
        "no acl": ("carol", "carol-secret"),
        "deny acl": ("dave", "dave-secret"),
        "allow acl": ("bob", "bob-secret"),
        "super user": ("admin", secure.admin_options(cluster.spec.data_dir)["sasl_plain_password"]),
    }[who]
    tokens = None
    if options is not None:  # one login per caller (a login is two PBKDF2 runs)
        key = (cluster.gateway, who)
        if key not in _LOGINS:
            config = SecurityConfig(**cluster.options(*options))
            _LOGINS[key] = ScramLogin(config, [cluster.gateway])
        tokens = _LOGINS[key]
    security = ChannelSecurity("SASL_SSL", cafile=cluster.cafile, tokens=tokens)

    async def call() -> Any:
        channel = security.channel(cluster.gateway)
        try:
            stub = gateway_pb2_grpc.GatewayStub(channel)
            with translate_errors(cluster.gateway):
                return await getattr(stub, method)(request, timeout=20)
        finally:
            await channel.close()

    try:
        response = asyncio.run(call())
    except StromError as exc:
        return exc
    if method in FILTERED:
        (topic,) = response.topics
        if topic.error_code == common_pb2.TOPIC_AUTHORIZATION_FAILED:
            return TopicAuthorizationFailedError()
    return None


def test_deny_matrix(cluster: SecureCluster) -> None:
    with cluster.admin() as admin:
        admin.create_topics([NewTopic(MATRIX_TOPIC, 1, 1)])
    for user in ("bob", "carol", "dave"):
        cluster.add_user(user, f"{user}-secret")
    everything = [
        AclBinding.create(rtype, "*", principal, "ALL", permission)
        for rtype in ("TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID")
        for principal, permission in (("User:bob", "ALLOW"), ("User:dave", "ALLOW"),
                                      ("User:dave", "DENY"))
    ]  # fmt: skip
    cluster.allow(*everything)
    failures = []
    for method, request in _requests().items():
        for who in ("no credentials", "wrong password", "no acl", "deny acl", "allow acl",
                    "super user"):  # fmt: skip
            error = _call(cluster, method=method, request=request, who=who)
            if who in ("no credentials", "wrong password"):
                ok = isinstance(error, SaslAuthenticationFailedError)
            elif who in ("no acl", "deny acl"):
                ok = isinstance(error, AuthorizationFailedError)
            else:
                ok = not isinstance(error, AuthorizationFailedError | SaslAuthenticationFailedError)
            if not ok:
                failures.append(f"{method} as {who}: {error!r}")
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

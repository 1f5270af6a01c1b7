"""``strom.aio.Admin``: topic and cluster administration through the gateway (asyncio).

::

    from strom import NewTopic
    from strom.aio import Admin

    async with Admin(bootstrap_servers="localhost:9092") as admin:
        await admin.create_topics([NewTopic("orders", num_partitions=6, replication_factor=3)])
        print(await admin.describe_topics(["orders"]))

Every method raises a ``strom.errors`` exception naming the topic, partition or group that
failed; when several fail, the first one is raised (``delete_consumer_groups`` reports each
group's outcome instead). ``list_offsets`` and ``delete_records`` go to the partition leaders'
storage nodes; the consumer-group operations go through the gateway to the group coordinators,
and are retried while a coordinator is moving or loading, within ``request_timeout_ms``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Unpack

from strom.admin._calls import RETRY_BACKOFF_S, AdminCalls, check, node_info
from strom.admin._groups import GroupAdmin
from strom.admin._security import SecurityAdmin
from strom.admin._transactions import TransactionAdmin
from strom.admin.config import AdminConfig, AdminOptions
from strom.admin.log_dirs import BrokerLogDirs, broker_log_dirs
from strom.admin.transactions import (
    HangingTransaction,
    ProducerState,
    TransactionDescription,
    TransactionListing,
)
from strom.cluster import (
    DEFAULT_BOOTSTRAP_SERVERS,
    METADATA_ERRORS,
    ClusterClient,
    list_offsets,
    storage_call,
    where,
)
from strom.cluster.retry import Deadline
from strom.errors import (
    BrokerResponseError,
    ConfigurationError,
    StromError,
    StromTimeoutError,
    for_code,
)
from strom.protocol.v1 import (
    common_pb2,
    controller_pb2,
    storage_pb2,
)
from strom.security.acl import AclBinding, AclFilter
from strom.security.config import security_of
from strom.security.scram import DEFAULT_ITERATIONS
from strom.types import (
    ClusterDescription,
    ConfigValue,
    ConsumerGroupDescription,
    ConsumerGroupListing,
    NewTopic,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    PartitionDescription,
    StagedCommit,
    StagedCommitResult,
    StagedTransaction,
    TopicDescription,
    TopicPartition,
)

__all__ = ["Admin"]

_SOURCES = {v: k for k, v in common_pb2.ConfigEntry.Source.items()}


class Admin:
    """Asyncio administration client; an async context manager (closes its channels)."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str] = DEFAULT_BOOTSTRAP_SERVERS,
        **options: Unpack[AdminOptions],
    ) -> None:
        """Options: ``AdminConfig`` (a bad value raises ``ConfigurationError``)."""
        config = self.config = AdminConfig(bootstrap_servers=bootstrap_servers, **options)
        self._cluster = ClusterClient(
            config.bootstrap_servers,
            request_timeout_ms=config.request_timeout_ms,
            client_id=config.client_id,
            gateway_only=config.gateway_only,
            security=security_of(config),
        )
        self.bootstrap_servers = self._cluster.bootstrap_servers
        self._timeout = config.request_timeout_ms / 1000
        self._calls = AdminCalls(self._cluster, self._timeout, config.default_api_timeout_ms / 1000)
        self._groups = GroupAdmin(self._calls)
        self._txns = TransactionAdmin(self._calls)
        self._security = SecurityAdmin(self._cluster, self._timeout)

    # -- cluster ------------------------------------------------------------------------------

    async def describe_cluster(self) -> ClusterDescription:
        response = await self._calls.call("Metadata", controller_pb2.MetadataRequest())
        controller = response.controller if response.HasField("controller") else None
        return ClusterDescription(
            cluster_id=response.cluster_id,
            controller=node_info(controller) if controller is not None else None,
            brokers=tuple(node_info(b) for b in response.brokers),
            controllers=tuple(node_info(c) for c in response.controllers),
        )

    async def describe_log_dirs(
        self, topics: Sequence[str] = (), broker_ids: Sequence[int] = ()
    ) -> list[BrokerLogDirs]:
        """Each storage node's log directories (filesystem size and usable space, the size
        of every replica), of every live node or of ``broker_ids``; only replicas of
        ``topics`` when given. A node that could not be asked is in the list with its
        ``error`` (Kafka's ``describeLogDirs``)."""
        request = storage_pb2.DescribeLogDirsRequest(
            topics=list(topics), broker_ids=list(broker_ids)
        )
        response = await self._calls.call("DescribeLogDirs", request)
        return [broker_log_dirs(b) for b in response.brokers]

    # -- topics -------------------------------------------------------------------------------

    async def create_topics(
        self, new_topics: Sequence[NewTopic], *, validate_only: bool = False
    ) -> None:
        request = controller_pb2.CreateTopicsRequest(
            timeout_ms=int(self._timeout * 1000), validate_only=validate_only
        )
        for topic in new_topics:
            entry = request.topics.add(
                name=topic.name,
                num_partitions=topic.num_partitions,
                replication_factor=topic.replication_factor,
            )
            entry.configs.update({str(k): str(v) for k, v in topic.topic_configs.items()})
            for partition, brokers in sorted((topic.replica_assignment or {}).items()):
                entry.assignments.add(partition=partition, broker_ids=list(brokers))
        check((await self._calls.call("CreateTopics", request)).topics, "topic")

    async def delete_topics(self, names: Sequence[str]) -> None:
        request = controller_pb2.DeleteTopicsRequest(
            names=list(names), timeout_ms=int(self._timeout * 1000)
        )
        check((await self._calls.call("DeleteTopics", request)).topics, "topic")

    async def list_topics(self, *, include_internal: bool = False) -> list[str]:
        response = await self._calls.call("Metadata", controller_pb2.MetadataRequest())
        return sorted(t.name for t in response.topics if include_internal or not t.is_internal)

    async def describe_topics(self, names: Sequence[str] | None = None) -> list[TopicDescription]:
        response = await self._calls.call(
            "Metadata", controller_pb2.MetadataRequest(topics=list(names or []))
        )
        described = []
        for t in response.topics:
            if t.error_code and names:
                # Metadata has no error message: name the code, not just the topic.
                raise for_code(t.error_code, f"{t.name}: {common_pb2.ErrorCode.Name(t.error_code)}")
            partitions = tuple(
                PartitionDescription(
                    partition=p.partition,
                    leader=p.leader_id,
                    leader_epoch=p.leader_epoch,
                    replicas=tuple(p.replicas),
                    isr=tuple(p.isr),
                    offline_replicas=tuple(p.offline_replicas),
                    error=common_pb2.ErrorCode.Name(p.error_code) if p.error_code else "",
                )
                for p in sorted(t.partitions, key=lambda p: p.partition)
            )
            described.append(TopicDescription(t.name, t.topic_id, t.is_internal, partitions))
        return sorted(described, key=lambda d: d.name)

    async def create_partitions(self, new_counts: Mapping[str, int]) -> None:
        request = controller_pb2.CreatePartitionsRequest(timeout_ms=int(self._timeout * 1000))
        for name, count in new_counts.items():
            request.topics.add(name=name, count=count)
        check((await self._calls.call("CreatePartitions", request)).topics, "topic")

    # -- configs ------------------------------------------------------------------------------

    async def describe_configs(self, topic: str) -> dict[str, ConfigValue]:
        request = controller_pb2.DescribeConfigsRequest(
            resources=[
                controller_pb2.ConfigResource(type=controller_pb2.RESOURCE_TOPIC, name=topic)
            ]
        )
        results = (await self._calls.call("DescribeConfigs", request)).results
        check(results, "topic")
        return {
            c.name: ConfigValue(
                c.name, c.value, _SOURCES.get(c.source, "SOURCE_UNKNOWN"), c.read_only
            )
            for r in results
            for c in r.configs
        }

    async def alter_configs(
        self,
        topic: str,
        *,
        set_configs: Mapping[str, str] | None = None,
        delete_configs: Sequence[str] = (),
        validate_only: bool = False,
    ) -> None:
        """Incrementally set and/or delete (back to the inherited value) topic configs."""
        resource = controller_pb2.AlterConfigsResource(
            type=controller_pb2.RESOURCE_TOPIC, name=topic
        )
        for name, value in (set_configs or {}).items():
            resource.ops.add(name=name, value=str(value), op=controller_pb2.AlterConfigOp.SET)
        for name in delete_configs:
            resource.ops.add(name=name, op=controller_pb2.AlterConfigOp.DELETE)
        request = controller_pb2.IncrementalAlterConfigsRequest(
            resources=[resource], validate_only=validate_only
        )
        check((await self._calls.call("IncrementalAlterConfigs", request)).results, "topic")

    # -- leaders and reassignment -------------------------------------------------------------

    async def elect_leaders(
        self, election_type: str = "preferred", partitions: Sequence[TopicPartition] | None = None
    ) -> dict[TopicPartition, str]:
        """Run a preferred (or unclean) election; returns each partition's outcome code name
        (``NONE`` when a new leader was elected, ``ELECTION_NOT_NEEDED`` when it already led)."""
        kinds = {"preferred": controller_pb2.PREFERRED, "unclean": controller_pb2.UNCLEAN}
        if election_type not in kinds:
            raise ConfigurationError(
                f"election_type must be preferred or unclean, got {election_type!r}"
            )
        request = controller_pb2.ElectLeadersRequest(
            election_type=kinds[election_type],
            partitions=[
                common_pb2.TopicPartition(topic=p.topic, partition=p.partition)
                for p in partitions or ()
            ],
            timeout_ms=int(self._timeout * 1000),
        )
        response = await self._calls.call("ElectLeaders", request)
        return {
            TopicPartition(p.topic, p.partition): common_pb2.ErrorCode.Name(p.error_code)
            for p in response.partitions
        }

    async def alter_partition_reassignments(
        self,
        reassignments: Mapping[TopicPartition, Sequence[int] | None],
        *,
        throttle_bytes_per_sec: int = 0,
    ) -> None:
        """Move partitions to new replica lists (preferred leader first); None cancels."""
        request = controller_pb2.AlterPartitionReassignmentsRequest(
            throttle_bytes_per_sec=throttle_bytes_per_sec, timeout_ms=int(self._timeout * 1000)
        )
        for tp, replicas in reassignments.items():
            request.reassignments.add(
                topic=tp.topic, partition=tp.partition, replicas=list(replicas or [])
            )
        check(
            (await self._calls.call("AlterPartitionReassignments", request)).partitions, "partition"
        )

    async def list_partition_reassignments(
        self,
    ) -> dict[TopicPartition, dict[str, tuple[int, ...]]]:
        response = await self._calls.call(
            "ListPartitionReassignments", controller_pb2.ListPartitionReassignmentsRequest()
        )
        return {
            TopicPartition(r.topic, r.partition): {
                "replicas": tuple(r.replicas),
                "adding": tuple(r.adding_replicas),
                "removing": tuple(r.removing_replicas),
            }
            for r in response.reassignments
        }

    # -- offsets (on the partition leaders) ----------------------------------------------------

    async def list_offsets(
        self,
        specs: Mapping[TopicPartition, str | int],
        *,
        isolation_level: str = "read_uncommitted",
    ) -> dict[TopicPartition, OffsetAndTimestamp]:
        """Offsets by spec per partition: ``"earliest"`` (log start), ``"latest"`` (high
        watermark), ``"max_timestamp"`` (the first record with the largest timestamp) or a
        timestamp in ms (first offset at or after it; offset -1 when none is)."""
        named = {
            "earliest": common_pb2.EARLIEST,
            "latest": common_pb2.LATEST,
            "max_timestamp": common_pb2.MAX_TIMESTAMP,
        }
        requests: dict[TopicPartition, tuple[int, int]] = {}
        for tp, spec in specs.items():
            if isinstance(spec, str) and spec in named:
                requests[tp] = (named[spec], 0)
            elif isinstance(spec, int) and not isinstance(spec, bool) and spec >= 0:
                requests[tp] = (common_pb2.TIMESTAMP, spec)
            else:
                raise ConfigurationError(
                    f"offset spec for {tp} must be earliest, latest, max_timestamp or a "
                    f"timestamp >= 0, got {spec!r}"
                )
        if isolation_level not in ("read_uncommitted", "read_committed"):
            raise ConfigurationError(f"unknown isolation_level {isolation_level!r}")
        found = await list_offsets(
            self._cluster,
            requests,
            isolation_level=(
                common_pb2.READ_COMMITTED
                if isolation_level == "read_committed"
                else common_pb2.READ_UNCOMMITTED
            ),
            timeout_s=self._timeout,
        )
        return {tp: OffsetAndTimestamp(offset, ts) for tp, (offset, ts) in found.items()}

    async def delete_records(
        self, offsets: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, int]:
        """Advance each partition's log start offset to the given offset (-1: the high
        watermark); returns the new low watermarks."""
        deadline = Deadline(self._timeout)
        remaining = dict(offsets)
        result: dict[TopicPartition, int] = {}
        while True:
            by_node: dict[int, list[TopicPartition]] = {}
            for tp in remaining:
                leader = await self._cluster.leader(tp)
                by_node.setdefault(leader.leader, []).append(tp)
            last: StromError | None = None
            for node, tps in by_node.items():
                request = storage_pb2.DeleteRecordsRequest(
                    timeout_ms=int(self._timeout * 1000),
                    partitions=[
                        storage_pb2.DeleteRecordsPartition(
                            topic=tp.topic, partition=tp.partition, offset=remaining[tp]
                        )
                        for tp in tps
                    ],
                )
                try:
                    response = await storage_call(
                        self._cluster, node, "DeleteRecords", request, self._timeout
                    )
                except StromError as exc:
                    if not exc.retriable:
                        raise
                    last = exc
                    self._cluster.mark_stale()
                    continue
                for r in response.partitions:
                    tp = TopicPartition(r.topic, r.partition)
                    if r.error_code == 0:
                        result[tp] = r.low_watermark
                        remaining.pop(tp, None)
                        continue
                    last = for_code(r.error_code, where(tp, r.error_message))
                    if r.error_code not in METADATA_ERRORS:
                        raise last
                    self._cluster.mark_stale(tp.topic)
            if not remaining:
                return result
            if not deadline.allows(RETRY_BACKOFF_S):
                raise last or StromTimeoutError("delete records did not complete in time")
            await asyncio.sleep(RETRY_BACKOFF_S)  # retry backoff after a leader move

    # -- consumer groups (through the gateway to the group coordinators) -----------------------

    async def list_consumer_groups(
        self, states: Sequence[str] | None = None
    ) -> list[ConsumerGroupListing]:
        """Every group known to the coordinators, optionally only those in ``states`` (Empty,
        PreparingRebalance, CompletingRebalance, Stable, Dead); sorted by group id."""
        return await self._groups.list_consumer_groups(states)

    async def describe_consumer_groups(
        self, group_ids: Sequence[str]
    ) -> dict[str, ConsumerGroupDescription]:
        """State, chosen assignor, coordinator and members (with their decoded assignments)
        of each group."""
        return await self._groups.describe_consumer_groups(group_ids)

    async def delete_consumer_groups(
        self, group_ids: Sequence[str]
    ) -> dict[str, BrokerResponseError | None]:
        """Delete groups with no members, and their committed offsets. Returns each group's
        outcome: None when deleted, else the error (``NonEmptyGroupError``,
        ``GroupIdNotFoundError``, ...); raises only when the request as a whole fails."""
        return await self._groups.delete_consumer_groups(group_ids)

    async def list_consumer_group_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition] | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's committed offsets (next offset to read), for ``partitions`` or every
        partition it committed; partitions without a committed offset are left out."""
        return await self._groups.list_consumer_group_offsets(group_id, partitions)

    async def alter_consumer_group_offsets(
        self, group_id: str, offsets: Mapping[TopicPartition, OffsetAndMetadata | int]
    ) -> None:
        """Set the group's committed offsets (the next offsets to read). Refused by the
        coordinator while the group has members: stop its consumers first."""
        await self._groups.alter_consumer_group_offsets(group_id, offsets)

    async def delete_consumer_group_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition]
    ) -> None:
        """Forget the group's committed offsets of ``partitions`` (refused for topics the
        group's members subscribe to: ``GroupSubscribedToTopicError``)."""
        await self._groups.delete_consumer_group_offsets(group_id, partitions)

    # -- transactions -------------------------------------------------------------------------

    async def list_transactions(
        self,
        *,
        states: Sequence[str] | None = None,
        producer_ids: Sequence[int] | None = None,
        duration_ms: int = 0,
        transactional_id_prefix: str | None = None,
    ) -> list[TransactionListing]:
        """Every transactional id the coordinators know, optionally only those in ``states``
        (Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort, Dead),
        of ``producer_ids``, open for longer than ``duration_ms``, or starting with
        ``transactional_id_prefix`` (filtered by the coordinators); sorted by id. Raises
        ``CoordinatorNotAvailableError`` when a coordinator did not answer (the list would
        be incomplete) after retrying within ``request_timeout_ms``."""
        return await self._txns.list_transactions(
            states=states,
            producer_ids=producer_ids,
            duration_ms=duration_ms,
            transactional_id_prefix=transactional_id_prefix,
        )

    async def describe_transactions(
        self, transactional_ids: Sequence[str]
    ) -> dict[str, TransactionDescription]:
        """State, producer id and epoch, timeout, start time, partitions and groups of each
        transactional id, from its coordinator (``TransactionalIdNotFoundError`` for an
        unknown id)."""
        return await self._txns.describe_transactions(transactional_ids)

    async def describe_producers(
        self, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, list[ProducerState]]:
        """The producers each partition's leader knows (id, epoch, last sequence and write
        time, coordinator epoch, the start offset of an open transaction)."""
        return await self._txns.describe_producers(partitions)

    async def find_hanging_transactions(
        self,
        partitions: Sequence[TopicPartition] | None = None,
        *,
        max_transaction_timeout_ms: int = 15 * 60 * 1000,
    ) -> list[HangingTransaction]:
        """Open transactions on ``partitions`` (default: every partition of every topic but
        the internal ones) whose producer wrote nothing for longer than
        ``max_transaction_timeout_ms`` and that no coordinator lists as Ongoing with that
        partition: nobody will end them, and they hold the last stable offset back."""
        if partitions is None:
            topics = await self.describe_topics(await self.list_topics())
            partitions = [TopicPartition(t.name, p.partition) for t in topics for p in t.partitions]
        return await self._txns.find_hanging_transactions(partitions, max_transaction_timeout_ms)

    async def abort_transaction(
        self, transactional_id: str, *, wait_timeout_ms: int | None = None
    ) -> TransactionDescription:
        """Abort the open transaction of ``transactional_id`` by fencing its producer (when
        none is open, nothing is done and the current description is returned):
        InitProducerId for the id (as a new producer with the id would) makes the
        coordinator abort the transaction and bump the epoch. The producer that left it
        open gets ``ProducerFencedError`` at its next call. Waits until the abort completed
        (up to ``wait_timeout_ms``, default ``request_timeout_ms``) and returns the id's new
        description."""
        return await self._txns.abort_transaction(transactional_id, wait_timeout_ms=wait_timeout_ms)

    # -- staged transactions ------------------------------------------------------------------

    async def commit_staged_transactions(
        self,
        commit_id: str,
        sequence: int,
        members: Sequence[StagedTransaction],
        metadata: bytes = b"",
    ) -> StagedCommitResult:
        """Commit staged transactions (``Producer.prepare_transaction()``) as ONE decision of
        ``commit_id`` at ``sequence``: the coordinator records the decision, then commits
        every member itself (and finishes after a failover), so the members become visible
        together even if this process dies right after asking.

        A ``sequence`` at or below the last decided one answers ``already_committed=True``
        and commits nothing (the caller should abort ``members``); repeating the last
        decision exactly (same sequence and members) is a retry and answers like the first
        call. A member not open at exactly its producer id and epoch raises
        ``InvalidTxnStateError`` naming it, and nothing is committed. Retriable failures are
        retried (safely: a retry is recognised) within ``request_timeout_ms``."""
        return await self._txns.commit_staged_transactions(commit_id, sequence, members, metadata)

    async def describe_staged_commit(self, commit_id: str) -> StagedCommit | None:
        """The last decision of ``commit_id`` (None when there is none)."""
        return await self._txns.describe_staged_commit(commit_id)

    async def abort_staged_transactions(self, members: Sequence[StagedTransaction]) -> None:
        """Abort staged transactions, each with its own producer id and epoch (EndTxn abort;
        works from any process). A member already ended (aborted, committed, fenced or
        expired) is not an error. Retriable failures are retried within
        ``request_timeout_ms``; the first other error is raised."""
        await self._txns.abort_staged_transactions(members)

    # -- users and ACLs (docs/security.md) ----------------------------------------------------

    async def upsert_scram_user(
        self,
        name: str,
        password: str,
        *,
        mechanism: str = "SCRAM-SHA-256",
        iterations: int = DEFAULT_ITERATIONS,
    ) -> None:
        """Create the SCRAM user ``name`` or change its password (salted here: the password
        never leaves the client)."""
        await self._security.upsert_user(name, password, mechanism, iterations)

    async def delete_scram_user(self, name: str, *, mechanism: str = "") -> None:
        """Delete the user (or only its ``mechanism`` credential)."""
        await self._security.delete_user(name, mechanism)

    async def describe_scram_users(
        self, names: Sequence[str] = ()
    ) -> dict[str, list[tuple[str, int]]]:
        """Users (every one when ``names`` is empty) -> [(mechanism, iterations)]."""
        return await self._security.describe_users(names)

    async def create_acls(self, acls: Sequence[AclBinding]) -> None:
        """Create ACLs (existing ones stay: creating twice stores once)."""
        await self._security.create_acls(acls)

    async def delete_acls(self, acl_filter: AclFilter | AclBinding) -> list[AclBinding]:
        """Delete the ACLs the filter (or the one binding) matches; returns them."""
        return await self._security.delete_acls(acl_filter)

    async def describe_acls(self, acl_filter: AclFilter | None = None) -> list[AclBinding]:
        """The ACLs the filter matches (every one without it)."""
        return await self._security.describe_acls(acl_filter)

    # -- life cycle ---------------------------------------------------------------------------

    async def close(self) -> None:
        await self._cluster.close()

    async def __aenter__(self) -> Admin:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

"""``python -m strom_coordinator`` / ``strom-coordinator``: run one group and transaction
coordinator.

Flags, ``STROM_*`` environment variables and a TOML file configure it (``--help`` lists every
setting; docs/coordinator.md explains them). It starts the gRPC server (GroupCoordinator and
TransactionCoordinator; health NOT_SERVING), registers in etcd, then serves and takes its share
of the ``__consumer_offsets`` and ``__transaction_state`` partitions.
"""

from __future__ import annotations

import asyncio

from strom.aio import Admin
from strom.cluster import ClusterClient
from strom.errors import StromError
from strom.protocol.v1.coordinator_pb2_grpc import add_GroupCoordinatorServicer_to_server
from strom.protocol.v1.transaction_pb2_grpc import add_TransactionCoordinatorServicer_to_server
from strom.types import TopicPartition
from strom_coordinator.config import CoordinatorConfig
from strom_coordinator.directory import GROUP, TRANSACTION, CoordinatorDirectory, TopicSettings
from strom_coordinator.group import records as group_records
from strom_coordinator.group.expiry import expire_periodically
from strom_coordinator.group.manager import GroupManager
from strom_coordinator.runtime.ownership import (
    init_producer_id,
    offsets_ownership,
    transaction_ownership,
)
from strom_coordinator.runtime.registration import CoordinatorRegistration
from strom_coordinator.runtime.runtime import CoordinatorRuntime
from strom_coordinator.runtime.shard import ShardContext, Tick
from strom_coordinator.servicer import GroupCoordinatorServicer
from strom_coordinator.staged_members import CoordinatorMembers
from strom_coordinator.stats import CoordinatorStats, LagTracker
from strom_coordinator.txn import records as txn_records
from strom_coordinator.txn.manager import TransactionManager, TxnConfig
from strom_coordinator.txn.markers import MarkerSender
from strom_coordinator.txn.servicer import TransactionCoordinatorServicer
from strom_coordinator.txn.timeouts import every
from strom_coordinator.txn_verifier import PeerTxnVerifier
from strom_server.etcd.keys import ClusterKeys
from strom_server.etcd.store import EtcdStore
from strom_server.rpc.server import GrpcServer
from strom_server.runner import run_service
from strom_server.runtime.values import advertised_address

#: Requests to the gateway and the storage nodes other than commits (topic creation, loading),
#: and calls to the other coordinators (a TxnOffsetCommit's check, a staged commit's members).
_REQUEST_TIMEOUT_MS = 30000


async def _committed(manager: GroupManager) -> list[tuple[str, TopicPartition, int]]:
    """Every committed offset of the served groups, for the lag gauges."""
    found = []
    for group in await manager.list_groups():
        try:
            offsets = await manager.fetch_offsets(group.group_id)
        except StromError:  # moved or unloaded meanwhile
            continue
        found += [
            (group.group_id, TopicPartition(o.topic, o.partition), o.offset)
            for o in offsets
            if o.offset >= 0
        ]
    return found


def _txn_config(config: CoordinatorConfig) -> TxnConfig:
    return TxnConfig(
        transaction_max_timeout_ms=config.transaction_max_timeout_ms,
        transactional_id_expiration_ms=config.transactional_id_expiration_ms,
    )


def _ticks(config: CoordinatorConfig, groups: GroupManager, txns: TransactionManager) -> list[Tick]:
    """Expiry of offsets and groups, aborts of timed-out transactions, expiry of idle ids."""
    offsets_s = config.offsets_retention_check_interval_ms / 1000
    aborts_s = config.transaction_abort_timed_out_transaction_cleanup_interval_ms / 1000
    ids_s = config.transaction_remove_expired_transaction_cleanup_interval_ms / 1000
    return [
        Tick("coordinator-expiry", lambda: expire_periodically(groups.expire, offsets_s)),
        Tick("coordinator-txn-timeouts", lambda: every(
            aborts_s, txns.abort_timed_out, "abort timed-out transactions")),
        Tick("coordinator-txn-expiry", lambda: every(
            ids_s, txns.expire, "expire transactional ids")),
    ]  # fmt: skip


def _topic_settings(config: CoordinatorConfig) -> dict[int, TopicSettings]:
    """How FindCoordinator creates each internal topic on first use, by key type."""
    return {
        GROUP: TopicSettings(config.offsets_topic_num_partitions,
                             config.offsets_topic_replication_factor,
                             config.offsets_topic_segment_bytes),
        TRANSACTION: TopicSettings(config.transaction_state_log_num_partitions,
                                   config.transaction_state_log_replication_factor,
                                   config.transaction_state_log_segment_bytes),
    }  # fmt: skip


async def build(config: CoordinatorConfig, server: GrpcServer) -> None:
    timeout_s = _REQUEST_TIMEOUT_MS / 1000
    write_timeout_s = config.offsets_commit_timeout_ms / 1000
    store = EtcdStore(config.etcd_endpoints)
    cluster = ClusterClient(config.bootstrap_servers, request_timeout_ms=_REQUEST_TIMEOUT_MS,
                            client_id=f"strom-coordinator-{config.coordinator_id}")  # fmt: skip
    admin = Admin(config.bootstrap_servers, request_timeout_ms=_REQUEST_TIMEOUT_MS)
    stats = CoordinatorStats()
    keys = ClusterKeys(config.etcd_prefix)
    registration = CoordinatorRegistration(
        store, keys, coordinator_id=config.coordinator_id, ttl_s=config.lease_ttl_s
    )
    runtime = CoordinatorRuntime(
        registration, cluster, write_timeout_s=write_timeout_s, request_timeout_s=timeout_s
    )

    async def fresh_producer_id() -> int:
        return (await init_producer_id(cluster, "", timeout_s))[0]

    # Groups: __consumer_offsets; transactions: __transaction_state.
    verifier = PeerTxnVerifier(runtime.peers, timeout_s=timeout_s)
    offsets = offsets_ownership(keys, group_records.ownership_marker)
    groups = runtime.host(offsets, lambda ctx: GroupManager(
        ctx.log, config.group_config(), stats=stats, verifier=verifier))  # fmt: skip
    markers = MarkerSender(cluster, runtime.peers, timeout_s=write_timeout_s)
    staged_members = CoordinatorMembers(runtime.peers, timeout_s=timeout_s)

    def transactions(ctx: ShardContext) -> TransactionManager:
        return TransactionManager(
            ctx.log, _txn_config(config), fresh_producer_id=fresh_producer_id,
            group_partition_for=groups.shard.partition_for, markers=markers,
            coordinator_epoch=ctx.owner_epoch, on_fenced=ctx.fenced, stats=stats,
            staged_members=staged_members,
        )  # fmt: skip

    txns = runtime.host(transaction_ownership(keys, txn_records.ownership_marker), transactions)
    staged_members.local = txns.shard
    for tick in _ticks(config, groups.shard, txns.shard):
        runtime.every(tick)
    directory = CoordinatorDirectory(admin)
    for key_type, hosted in ((GROUP, groups), (TRANSACTION, txns)):
        settings = _topic_settings(config)[key_type]
        directory.add(key_type, hosted.ownership, hosted.shard.partition_for, settings)

    server.add_service(add_GroupCoordinatorServicer_to_server,
                       GroupCoordinatorServicer(groups.shard, directory))  # fmt: skip
    txn_servicer = TransactionCoordinatorServicer(txns.shard, config.coordinator_id)
    server.add_service(add_TransactionCoordinatorServicer_to_server, txn_servicer)
    lag = LagTracker(cluster, lambda: _committed(groups.shard), asyncio.get_running_loop())
    stats.watch(groups.shard.group_counts_by_state, groups.loaded_count, lag)
    stats.watch_transactions(txns.shard.counts_by_state, txns.loaded_count)

    await server.start()  # the bound port goes into the registration
    # Not ready (health NOT_SERVING) until registered in etcd.
    for name in ("", *server.service_names):
        await server.set_serving(name, False)
    await runtime.start(*advertised_address(config.listen, config.advertised_listen, server.port))
    for name in ("", *server.service_names):
        await server.set_serving(name, True)

    async def close() -> None:
        await runtime.close()
        for closing in (admin.close, cluster.close, store.close):
            await closing()

    server.on_shutdown(close)


def main() -> None:
    raise SystemExit(
        run_service(
            CoordinatorConfig,
            "strom-coordinator",
            build,
            description="Strom group and transaction coordinator",
        )
    )


if __name__ == "__main__":
    main()

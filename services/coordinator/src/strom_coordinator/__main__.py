"""``python -m strom_coordinator`` / ``strom-coordinator``: run one group and transaction
coordinator.

Flags, ``STROM_*`` environment variables and a TOML file configure it (``--help`` lists every
setting; docs/coordinator.md explains them). It starts the gRPC server (GroupCoordinator and
TransactionCoordinator; health NOT_SERVING), registers in etcd, then serves and takes its share
of the ``__consumer_offsets`` and ``__transaction_state`` partitions.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from strom.aio import Admin
from strom.cluster import ClusterClient
from strom.errors import StromError
from strom.protocol.v1.coordinator_pb2_grpc import add_GroupCoordinatorServicer_to_server
from strom.protocol.v1.transaction_pb2_grpc import add_TransactionCoordinatorServicer_to_server
from strom.types import TopicPartition
from strom_coordinator.config import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, CoordinatorConfig
from strom_coordinator.directory import CoordinatorDirectory, TopicSettings
from strom_coordinator.group.expiry import expire_periodically
from strom_coordinator.group.manager import GroupManager
from strom_coordinator.offsets_log import OffsetsLog
from strom_coordinator.ownership import (
    PartitionOwnership,
    init_producer_id,
    offsets_ownership,
    transaction_ownership,
)
from strom_coordinator.registration import CoordinatorRegistration
from strom_coordinator.servicer import GroupCoordinatorServicer
from strom_coordinator.staged_members import CoordinatorMembers
from strom_coordinator.stats import CoordinatorStats, LagTracker
from strom_coordinator.txn import records as txn_records
from strom_coordinator.txn.manager import TransactionManager, TxnConfig
from strom_coordinator.txn.markers import MarkerSender
from strom_coordinator.txn.servicer import TransactionCoordinatorServicer
from strom_coordinator.txn.timeouts import every
from strom_coordinator.txn_verifier import GatewayTxnVerifier
from strom_server.etcd.keys import ClusterKeys
from strom_server.etcd.store import EtcdStore
from strom_server.rpc.server import GrpcServer
from strom_server.runner import run_service
from strom_server.runtime.values import advertised_address

#: Requests to the gateway and the storage nodes other than commits (topic creation, loading).
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


async def build(config: CoordinatorConfig, server: GrpcServer) -> None:
    timeout_s = _REQUEST_TIMEOUT_MS / 1000
    write_timeout_s = config.offsets_commit_timeout_ms / 1000
    store = EtcdStore(config.etcd_endpoints)
    cluster = ClusterClient(
        config.bootstrap_servers,
        request_timeout_ms=_REQUEST_TIMEOUT_MS,
        client_id=f"strom-coordinator-{config.coordinator_id}",
    )
    admin = Admin(config.bootstrap_servers, request_timeout_ms=_REQUEST_TIMEOUT_MS)
    stats = CoordinatorStats()
    keys = ClusterKeys(config.etcd_prefix)
    registration = CoordinatorRegistration(
        store, keys, coordinator_id=config.coordinator_id, ttl_s=config.lease_ttl_s
    )
    ownerships: dict[str, PartitionOwnership] = {}

    def reinit_for(topic: str) -> Callable[[int], Awaitable[tuple[int, int]]]:
        async def reinit(partition: int) -> tuple[int, int]:
            return await ownerships[topic].init_producer(partition)

        return reinit

    def fenced_for(topic: str) -> Callable[[int], None]:
        def fenced(partition: int) -> None:
            if topic in ownerships:
                ownerships[topic].fenced(partition)

        return fenced

    # Groups: __consumer_offsets.
    offsets_log = OffsetsLog(
        cluster,
        timeout_s=write_timeout_s,
        reinit=reinit_for(OFFSETS_TOPIC),
        on_fenced=fenced_for(OFFSETS_TOPIC),
    )
    verifier = GatewayTxnVerifier(cluster, timeout_s=timeout_s)
    manager = GroupManager(offsets_log, config.group_config(), stats=stats, verifier=verifier)
    manager.use_session(registration.session)
    ownership = ownerships[OFFSETS_TOPIC] = PartitionOwnership(
        registration, offsets_ownership(keys), manager, offsets_log, cluster,
        request_timeout_s=timeout_s,
    )  # fmt: skip
    directory = CoordinatorDirectory(ownership, manager.partition_for, admin, config)

    # Transactions: __transaction_state.
    def locate_group(group_id: str) -> tuple[str, int] | None:
        try:
            partition = manager.partition_for(group_id)
        except StromError:
            return None
        owner = ownership.owners.get(partition)
        member = registration.members.get(owner.coordinator_id) if owner else None
        return None if member is None else (f"{member.host}:{member.port}", partition)

    async def fresh_producer_id() -> int:
        return (await init_producer_id(cluster, "", timeout_s))[0]

    def txn_owner_epoch(partition: int) -> int | None:
        return ownerships[TRANSACTION_STATE_TOPIC].owner_epoch(partition)

    txn_log = OffsetsLog(
        cluster,
        timeout_s=write_timeout_s,
        reinit=reinit_for(TRANSACTION_STATE_TOPIC),
        on_fenced=fenced_for(TRANSACTION_STATE_TOPIC),
        topic=TRANSACTION_STATE_TOPIC,
    )
    markers = MarkerSender(cluster, locate_group, timeout_s=write_timeout_s)
    staged_members = CoordinatorMembers(cluster, timeout_s=timeout_s)
    txn_manager = TransactionManager(
        txn_log,
        _txn_config(config),
        fresh_producer_id=fresh_producer_id,
        group_partition_for=manager.partition_for,
        markers=markers,
        coordinator_epoch=txn_owner_epoch,
        on_fenced=fenced_for(TRANSACTION_STATE_TOPIC),
        stats=stats,
        staged_members=staged_members,
    )
    staged_members.local = txn_manager
    txn_manager.use_session(registration.session)
    txn_ownership = ownerships[TRANSACTION_STATE_TOPIC] = PartitionOwnership(
        registration, transaction_ownership(keys, txn_records.ownership_marker), txn_manager,
        txn_log, cluster, request_timeout_s=timeout_s,
    )  # fmt: skip
    directory.add_transactions(
        txn_ownership,
        txn_manager.partition_for,
        TopicSettings(
            config.transaction_state_log_num_partitions,
            config.transaction_state_log_replication_factor,
            config.transaction_state_log_segment_bytes,
        ),
    )

    server.add_service(add_GroupCoordinatorServicer_to_server,
                       GroupCoordinatorServicer(manager, directory))  # fmt: skip
    txn_servicer = TransactionCoordinatorServicer(txn_manager, config.coordinator_id)
    server.add_service(add_TransactionCoordinatorServicer_to_server, txn_servicer)
    lag = LagTracker(cluster, lambda: _committed(manager), asyncio.get_running_loop())
    stats.watch(manager.group_counts_by_state, lambda: len(ownership.loaded()), lag)
    stats.watch_transactions(txn_manager.counts_by_state, lambda: len(txn_ownership.loaded()))

    await server.start()  # the bound port goes into the registration
    # Not ready (health NOT_SERVING) until registered in etcd.
    for name in ("", *server.service_names):
        await server.set_serving(name, False)
    address = advertised_address(config.listen, config.advertised_listen, server.port)
    await registration.start(*address)
    for owned in ownerships.values():
        owned.start()
    background = [
        asyncio.create_task(
            expire_periodically(manager.expire, config.offsets_retention_check_interval_ms / 1000),
            name="coordinator-expiry",
        ),
        asyncio.create_task(
            every(
                config.transaction_abort_timed_out_transaction_cleanup_interval_ms / 1000,
                txn_manager.abort_timed_out,
                "abort timed-out transactions",
            ),
            name="coordinator-txn-timeouts",
        ),
        asyncio.create_task(
            every(
                config.transaction_remove_expired_transaction_cleanup_interval_ms / 1000,
                txn_manager.expire,
                "expire transactional ids",
            ),
            name="coordinator-txn-expiry",
        ),
    ]
    for name in ("", *server.service_names):
        await server.set_serving(name, True)

    async def close() -> None:
        for task in background:
            task.cancel()
        for task in background:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await registration.stop_following()
        for owned in ownerships.values():
            await owned.close()
        await txn_manager.close()
        await registration.revoke()
        await offsets_log.close_all()
        await txn_log.close_all()
        await markers.close()
        await admin.close()
        await cluster.close()
        await store.close()

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

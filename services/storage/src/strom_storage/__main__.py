"""``python -m strom_storage`` / ``strom-storage``: run one storage node.

Flags, ``STROM_*`` environment variables and a TOML file configure it (``--help`` lists every
setting; docs/storage.md explains them).
"""

from __future__ import annotations

import asyncio

from strom.errors import ConfigurationError
from strom_server.etcd.keys import ClusterKeys
from strom_server.etcd.store import EtcdStore
from strom_server.rpc.server import GrpcServer
from strom_server.runner import run_service
from strom_server.runtime.clock import SystemClock
from strom_server.runtime.logs import get_logger
from strom_storage.config import StorageConfig
from strom_storage.log import Log
from strom_storage.log.cleaner.manager import LogCleaner
from strom_storage.log.log_manager import LogManager
from strom_storage.membership.cluster_link import ClusterLink
from strom_storage.node import ReplicaManager
from strom_storage.node.leader_lease import LeaderLease
from strom_storage.replication import (
    AlterPartitionClient,
    FetcherSettings,
    ReplicaFetcherManager,
)
from strom_storage.servicer import StorageServicer, add_to_server
from strom_storage.stats import NodeStats
from strom_storage.txn import CoordinatorTxnVerifier

log = get_logger(__name__)


def open_replica_manager(config: StorageConfig) -> ReplicaManager:
    """Open the node's logs (recovering them if needed) and the partitions it hosts."""
    cleaner = (
        LogCleaner(dedupe_buffer_bytes=int(config.log_cleaner_dedupe_buffer_size))
        if config.log_cleaner_enable
        else None
    )
    logs = LogManager(
        config.log_dirs,
        clock=SystemClock(),
        default_config=config.log_defaults(),
        retention_check_interval_ms=config.log_retention_check_interval_ms,
        checkpoint_interval_ms=config.log_flush_offset_checkpoint_interval_ms,
        cleaner=cleaner,
    )
    stats = NodeStats()
    replicas = ReplicaManager(
        logs,
        node_id=config.node_id,
        stats=stats,
        replica_lag_time_max_ms=config.replica_lag_time_max_ms,
    )
    found = replicas.hosted.open_existing()
    for topic, count in config.hosted_topics():
        for index in range(count):
            replicas.hosted.host(topic, index)

    def partition_logs() -> list[tuple[str, int, Log]]:
        return [(p.topic, p.index, p.log) for p in replicas.hosted.partitions()]

    stats.watch_logs(partition_logs)
    if cleaner is not None:
        stats.watch_cleaner(cleaner, partition_logs)
    stats.watch_replication(replicas.hosted.partitions)
    stats.watch_transactions(replicas.hosted.partitions)
    log.info("logs open", node_id=config.node_id, recovered=len(found),
             partitions=len(replicas.hosted.partitions()))  # fmt: skip
    return replicas


async def build(config: StorageConfig, server: GrpcServer) -> None:
    if config.topics and not config.standalone:
        raise ConfigurationError(
            "--topics is for standalone nodes (--etcd-endpoints ''); in a cluster, create "
            "topics through the controller"
        )
    replicas = open_replica_manager(config)
    link = None
    fetchers: ReplicaFetcherManager | None = None
    isr_updates: AlterPartitionClient | None = None
    isr_checks: asyncio.Task[None] | None = None
    verifier: CoordinatorTxnVerifier | None = None
    if not config.standalone:
        host, port = config.advertised()
        link = ClusterLink(
            replicas,
            store=EtcdStore(config.etcd_endpoints),
            keys=ClusterKeys(config.etcd_prefix),
            node_id=config.node_id,
            host=host,
            port=port,
            rack=config.rack,
            session_timeout_s=config.broker_session_timeout_ms / 1000,
            base_config=config.log_defaults(),
            lease=LeaderLease(),
        )
        replicas.lease = link.lease
        fetchers = ReplicaFetcherManager(
            replicas,
            node_id=config.node_id,
            address_of=link.address_of,
            throttle_of=link.throttle_of,
            settings=FetcherSettings(
                max_bytes=int(config.replica_fetch_max_bytes),
                response_max_bytes=int(config.replica_fetch_response_max_bytes),
                max_wait_ms=config.replica_fetch_wait_max_ms,
                min_bytes=config.replica_fetch_min_bytes,
                backoff_ms=config.replica_fetch_backoff_ms,
            ),
        )
        link_ = link
        isr_updates = AlterPartitionClient(
            replicas,
            node_id=config.node_id,
            controller_address=lambda: link_.controller_address,
            broker_epoch=lambda: link_.broker_epoch,
        )
        replicas.hosted.followers, replicas.isr_updates = fetchers, isr_updates
        verifier = CoordinatorTxnVerifier(
            lambda: link_.coordinator_addresses, max_message_size=int(config.max_message_size)
        )
        replicas.txn_verifier = verifier
        isr_updates.start()
        try:
            await link.start()
        except BaseException:
            await fetchers.close()
            await isr_updates.close()
            replicas.close()
            raise
        isr_checks = asyncio.ensure_future(replicas.run_isr_checks())
    replicas.logs.start()
    servicer = StorageServicer(replicas)
    server.add_service(add_to_server, servicer)

    async def stop_replicating() -> None:
        if isr_checks is not None:
            isr_checks.cancel()
        if fetchers is not None:
            await fetchers.close()
        await servicer.close_streams()

    server.on_draining(stop_replicating)

    async def close() -> None:
        if isr_updates is not None:
            await isr_updates.close()
        if verifier is not None:
            await verifier.close()
        if link is not None:
            await link.close()
        await replicas.logs.stop()
        replicas.close()

    server.on_shutdown(close)


def main() -> None:
    raise SystemExit(
        run_service(StorageConfig, "strom-storage", build, description="Strom storage node")
    )


if __name__ == "__main__":
    main()

"""``python -m strom_storage`` / ``strom-storage``: run one storage node.

Flags, ``STROM_*`` environment variables and a TOML file configure it (``--help`` lists every
setting; docs/storage.md explains them).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

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


@dataclass
class ClusterMember:
    """What a node in a cluster runs beside its partitions: its registration and view of the
    cluster (``ClusterLink``), the fetchers of the partitions it follows, ISR changes sent to
    the controller, the ISR checks, and transaction verification."""

    link: ClusterLink
    fetchers: ReplicaFetcherManager
    isr_updates: AlterPartitionClient
    verifier: CoordinatorTxnVerifier
    isr_checks: asyncio.Task[None] | None = None

    @classmethod
    def wire(cls, config: StorageConfig, replicas: ReplicaManager) -> ClusterMember:
        """The parts, wired into ``replicas`` (nothing started yet)."""
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
        isr_updates = AlterPartitionClient(
            replicas,
            node_id=config.node_id,
            controller_address=lambda: link.controller_address,
            broker_epoch=lambda: link.broker_epoch,
        )
        replicas.hosted.followers, replicas.isr_updates = fetchers, isr_updates
        verifier = CoordinatorTxnVerifier(
            lambda: link.coordinator_addresses, max_message_size=int(config.max_message_size)
        )
        replicas.txn_verifier = verifier
        return cls(link, fetchers, isr_updates, verifier)

    async def start(self, replicas: ReplicaManager) -> None:
        """Join the cluster (closing what was started, and the logs, when that fails)."""
        self.isr_updates.start()
        try:
            await self.link.start()
        except BaseException:
            await self.fetchers.close()
            await self.isr_updates.close()
            replicas.close()
            raise
        self.isr_checks = asyncio.ensure_future(replicas.run_isr_checks())

    async def stop_replicating(self) -> None:
        if self.isr_checks is not None:
            self.isr_checks.cancel()
        await self.fetchers.close()

    async def close(self) -> None:
        await self.isr_updates.close()
        await self.verifier.close()
        await self.link.close()


async def build(config: StorageConfig, server: GrpcServer) -> None:
    if config.topics and not config.standalone:
        raise ConfigurationError(
            "--topics is for standalone nodes (--etcd-endpoints ''); in a cluster, create "
            "topics through the controller"
        )
    replicas = open_replica_manager(config)
    member = None
    if not config.standalone:
        member = ClusterMember.wire(config, replicas)
        await member.start(replicas)
    replicas.logs.start()
    servicer = StorageServicer(replicas)
    server.add_service(add_to_server, servicer)

    async def stop_replicating() -> None:
        if member is not None:
            await member.stop_replicating()
        await servicer.close_streams()

    server.on_draining(stop_replicating)

    async def close() -> None:
        if member is not None:
            await member.close()
        await replicas.logs.stop()
        replicas.close()

    server.on_shutdown(close)


def main() -> None:
    raise SystemExit(
        run_service(StorageConfig, "strom-storage", build, description="Strom storage node")
    )


if __name__ == "__main__":
    main()

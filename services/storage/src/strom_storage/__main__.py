"""``python -m strom_storage`` / ``strom-storage``: run one storage node.

Flags, ``STROM_*`` environment variables and a TOML file configure it (``--help`` lists every
setting; docs/storage.md explains them).
"""

from __future__ import annotations

from strom.errors import ConfigurationError
from strom_server.clock import SystemClock
from strom_server.cluster_keys import ClusterKeys
from strom_server.etcd_store import EtcdStore
from strom_server.grpc_server import GrpcServer
from strom_server.logs import get_logger
from strom_server.runner import run_service
from strom_storage.config import StorageConfig
from strom_storage.log.cleaner.manager import LogCleaner
from strom_storage.log.log_manager import LogManager
from strom_storage.membership.cluster_link import ClusterLink
from strom_storage.node import ReplicaManager
from strom_storage.servicer import StorageServicer, add_to_server
from strom_storage.stats import NodeStats

log = get_logger(__name__)


def open_replica_manager(config: StorageConfig) -> ReplicaManager:
    """Open the node's logs (recovering them if needed) and the partitions it hosts."""
    logs = LogManager(
        config.log_dirs,
        clock=SystemClock(),
        default_config=config.log_defaults(),
        retention_check_interval_ms=config.log_retention_check_interval_ms,
        checkpoint_interval_ms=config.log_flush_offset_checkpoint_interval_ms,
        cleaner=(
            LogCleaner(dedupe_buffer_bytes=int(config.log_cleaner_dedupe_buffer_size))
            if config.log_cleaner_enable
            else None
        ),
    )
    stats = NodeStats()
    replicas = ReplicaManager(logs, node_id=config.node_id, stats=stats)
    found = replicas.open_existing()
    for topic, count in config.hosted_topics():
        for index in range(count):
            replicas.host(topic, index)
    stats.watch_logs(lambda: [(p.topic, p.index, p.log) for p in replicas.partitions()])
    log.info("logs open", node_id=config.node_id, recovered=len(found),
             partitions=len(replicas.partitions()))  # fmt: skip
    return replicas


async def build(config: StorageConfig, server: GrpcServer) -> None:
    if config.topics and not config.standalone:
        raise ConfigurationError(
            "--topics is for standalone nodes (--etcd-endpoints ''); in a cluster, create "
            "topics through the controller"
        )
    replicas = open_replica_manager(config)
    link = None
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
        )
        try:
            await link.start()
        except BaseException:
            replicas.close()
            raise
    replicas.logs.start()
    server.add_service(add_to_server, StorageServicer(replicas))

    async def close() -> None:
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

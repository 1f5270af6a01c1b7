"""``python -m strom_coordinator`` / ``strom-coordinator``: run one group coordinator.

Flags, ``STROM_*`` environment variables and a TOML file configure it (``--help`` lists every
setting; docs/coordinator.md explains them). It starts the gRPC server (health NOT_SERVING),
registers in etcd, then serves and takes its share of the ``__consumer_offsets`` partitions.
"""

from __future__ import annotations

import asyncio
import contextlib

from strom.aio import Admin
from strom.cluster import ClusterClient
from strom.errors import StromError
from strom.protocol.v1.coordinator_pb2_grpc import add_GroupCoordinatorServicer_to_server
from strom.types import TopicPartition
from strom_coordinator.config import CoordinatorConfig
from strom_coordinator.directory import CoordinatorDirectory
from strom_coordinator.group.expiry import expire_periodically
from strom_coordinator.group.manager import GroupManager
from strom_coordinator.offsets_log import OffsetsLog
from strom_coordinator.ownership import PartitionOwnership
from strom_coordinator.servicer import GroupCoordinatorServicer
from strom_coordinator.stats import CoordinatorStats, LagTracker
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


async def build(config: CoordinatorConfig, server: GrpcServer) -> None:
    timeout_s = _REQUEST_TIMEOUT_MS / 1000
    store = EtcdStore(config.etcd_endpoints)
    cluster = ClusterClient(
        config.bootstrap_servers,
        request_timeout_ms=_REQUEST_TIMEOUT_MS,
        client_id=f"strom-coordinator-{config.coordinator_id}",
    )
    admin = Admin(config.bootstrap_servers, request_timeout_ms=_REQUEST_TIMEOUT_MS)
    stats = CoordinatorStats()
    ownership: PartitionOwnership | None = None

    async def reinit(partition: int) -> tuple[int, int]:
        assert ownership is not None
        return await ownership.init_producer(partition)

    def fenced(partition: int) -> None:
        if ownership is not None:
            ownership.fenced(partition)

    offsets_log = OffsetsLog(
        cluster,
        timeout_s=config.offsets_commit_timeout_ms / 1000,
        reinit=reinit,
        on_fenced=fenced,
    )
    verifier = GatewayTxnVerifier(cluster, timeout_s=timeout_s)
    manager = GroupManager(offsets_log, config.group_config(), stats=stats, verifier=verifier)
    ownership = PartitionOwnership(
        store,
        ClusterKeys(config.etcd_prefix),
        manager,
        offsets_log,
        cluster,
        coordinator_id=config.coordinator_id,
        ttl_s=config.lease_ttl_s,
        request_timeout_s=timeout_s,
    )
    directory = CoordinatorDirectory(ownership, manager.partition_for, admin, config)
    server.add_service(add_GroupCoordinatorServicer_to_server,
                       GroupCoordinatorServicer(manager, directory))  # fmt: skip
    lag = LagTracker(cluster, lambda: _committed(manager), asyncio.get_running_loop())
    stats.watch(manager.group_counts_by_state, lambda: len(ownership.loaded()), lag)

    await server.start()  # the bound port goes into the registration
    # Not ready (health NOT_SERVING) until registered in etcd.
    for name in ("", *server.service_names):
        await server.set_serving(name, False)
    address = advertised_address(config.listen, config.advertised_listen, server.port)
    await ownership.start(*address)
    expiry = asyncio.create_task(
        expire_periodically(manager.expire, config.offsets_retention_check_interval_ms / 1000),
        name="coordinator-expiry",
    )
    for name in ("", *server.service_names):
        await server.set_serving(name, True)

    async def close() -> None:
        expiry.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await expiry
        assert ownership is not None
        await ownership.close()
        await offsets_log.close_all()
        await admin.close()
        await cluster.close()
        await store.close()

    server.on_shutdown(close)


def main() -> None:
    raise SystemExit(
        run_service(
            CoordinatorConfig, "strom-coordinator", build, description="Strom group coordinator"
        )
    )


if __name__ == "__main__":
    main()

"""``python -m strom_gateway`` / ``strom-gateway``: run a gateway (``--help`` for settings)."""

from __future__ import annotations

from strom.protocol.v1.security_pb2_grpc import add_SecurityServicer_to_server
from strom.security import ChannelSecurity
from strom_gateway.api.servicer import GatewayServicer, add_to_server
from strom_gateway.config import GatewayConfig
from strom_gateway.kafka.listener import KafkaListener
from strom_gateway.kafka.start import Routes, start_kafka_listener
from strom_gateway.routing.byte_budget import ByteBudget
from strom_gateway.routing.controller import ControllerRouter
from strom_gateway.routing.coordinator_registry import CoordinatorRegistry
from strom_gateway.routing.coordinators import CoordinatorRouter
from strom_gateway.routing.data_path import DataPath
from strom_gateway.routing.leaders import LeaderRouter
from strom_gateway.routing.log_dirs import LogDirsFanOut
from strom_gateway.routing.metadata_cache import MetadataCache
from strom_server.etcd.controller_locator import ControllerLocator
from strom_server.etcd.keys import ClusterKeys
from strom_server.etcd.store import EtcdStore
from strom_server.rpc.server import GrpcServer
from strom_server.runner import run_service
from strom_server.runtime.logs import get_logger

log = get_logger(__name__)


async def _nothing() -> None:
    """The gateway's own routers are closed at shutdown, not by the Kafka listener."""


async def build(config: GatewayConfig, server: GrpcServer) -> None:
    keys = ClusterKeys(config.etcd_prefix)
    locator = ControllerLocator(EtcdStore(config.etcd_endpoints), keys)
    await locator.start()
    registry = CoordinatorRegistry(EtcdStore(config.etcd_endpoints), keys)
    await registry.start()
    router = ControllerRouter(locator, max_message_size=int(config.max_message_size))
    coordinators = CoordinatorRouter(registry, max_message_size=int(config.max_message_size))
    metadata = MetadataCache(router, max_age_s=config.metadata_max_age_ms / 1000)
    leaders = LeaderRouter(metadata, max_message_size=int(config.max_message_size))
    data = DataPath(leaders, ByteBudget(int(config.max_inflight_bytes)))
    log_dirs_store = EtcdStore(config.etcd_endpoints)
    servicer = GatewayServicer(
        router,
        coordinators,
        data,
        default_timeout_s=config.request_timeout_ms / 1000,
        log_dirs=LogDirsFanOut(log_dirs_store, keys, leaders),
    )
    server.add_service(add_to_server, servicer)
    if server.security is not None:  # logins, users and ACLs (docs/security.md)
        server.add_service(add_SecurityServicer_to_server, server.security.servicer())

    def user_routes(security: ChannelSecurity | None) -> Routes:
        """Routers like the ones above, calling with ``security`` (the secured Kafka
        listener's, one set per authenticated user: docs/security.md)."""
        size = int(config.max_message_size)
        user_router = ControllerRouter(locator, max_message_size=size, security=security)
        user_coordinators = CoordinatorRouter(registry, max_message_size=size, security=security)
        user_metadata = MetadataCache(user_router, max_age_s=config.metadata_max_age_ms / 1000)
        user_leaders = LeaderRouter(user_metadata, max_message_size=size, security=security)

        async def close_user_routes() -> None:
            await user_coordinators.close()
            await user_leaders.close()
            await user_router.close()

        user_data = DataPath(user_leaders, data.budget)
        return Routes(user_router, user_coordinators, user_data, close_user_routes)

    kafka: KafkaListener | None = await start_kafka_listener(
        listen=config.kafka_port,
        advertised=config.kafka_advertised,
        routes=Routes(router, coordinators, data, close=_nothing),
        routes_for=user_routes,
        timeout_s=config.request_timeout_ms / 1000,
        max_frame_bytes=int(config.max_message_size),
        security=server.security,
    )

    async def close() -> None:
        if kafka is not None:
            await kafka.close()
        await coordinators.close()
        await leaders.close()
        await router.close()
        await registry.close()
        await locator.close()
        await log_dirs_store.close()

    server.on_shutdown(close)


def main() -> None:
    raise SystemExit(
        run_service(GatewayConfig, "strom-gateway", build, description="Strom gateway")
    )


if __name__ == "__main__":
    main()

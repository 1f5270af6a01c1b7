"""``python -m strom_gateway`` / ``strom-gateway``: run a gateway (``--help`` for settings)."""

from __future__ import annotations

from strom.protocol.v1.security_pb2_grpc import add_SecurityServicer_to_server
from strom_gateway.byte_budget import ByteBudget
from strom_gateway.config import GatewayConfig
from strom_gateway.coordinator_registry import CoordinatorRegistry
from strom_gateway.coordinator_router import CoordinatorRouter
from strom_gateway.data_path import DataPath
from strom_gateway.kafka import start_kafka_listener
from strom_gateway.leader_router import LeaderRouter
from strom_gateway.metadata_cache import MetadataCache
from strom_gateway.routing import ControllerRouter
from strom_gateway.servicer import GatewayServicer, add_to_server
from strom_server.etcd.controller_locator import ControllerLocator
from strom_server.etcd.keys import ClusterKeys
from strom_server.etcd.store import EtcdStore
from strom_server.rpc.server import GrpcServer
from strom_server.runner import run_service
from strom_server.runtime.logs import get_logger

log = get_logger(__name__)


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
    servicer = GatewayServicer(
        router, coordinators, data, default_timeout_s=config.request_timeout_ms / 1000
    )
    server.add_service(add_to_server, servicer)
    if server.security is not None:  # logins, users and ACLs (docs/security.md)
        server.add_service(add_SecurityServicer_to_server, server.security.servicer())
    # The Kafka-protocol listener has no SASL/TLS yet: it would serve every request as the
    # gateway itself, so a secured gateway does not start it (docs/security.md).
    kafka = None
    if server.security is None:
        kafka = await start_kafka_listener(
            listen=config.kafka_port,
            advertised=config.kafka_advertised,
            router=router,
            coordinators=coordinators,
            data=data,
            timeout_s=config.request_timeout_ms / 1000,
            max_frame_bytes=int(config.max_message_size),
        )
    else:
        log.warning("kafka-protocol listener not started: it has no SASL/TLS yet")

    async def close() -> None:
        if kafka is not None:
            await kafka.close()
        await coordinators.close()
        await leaders.close()
        await router.close()
        await registry.close()
        await locator.close()

    server.on_shutdown(close)


def main() -> None:
    raise SystemExit(
        run_service(GatewayConfig, "strom-gateway", build, description="Strom gateway")
    )


if __name__ == "__main__":
    main()

"""``python -m strom_gateway`` / ``strom-gateway``: run a gateway (``--help`` for settings)."""

from __future__ import annotations

from strom.protocol.v1.gateway_pb2_grpc import add_GatewayServicer_to_server
from strom_gateway.config import GatewayConfig
from strom_gateway.routing import ControllerRouter
from strom_gateway.servicer import GatewayServicer
from strom_server.cluster_keys import ClusterKeys
from strom_server.controller_locator import ControllerLocator
from strom_server.etcd_store import EtcdStore
from strom_server.grpc_server import GrpcServer
from strom_server.runner import run_service


async def build(config: GatewayConfig, server: GrpcServer) -> None:
    locator = ControllerLocator(EtcdStore(config.etcd_endpoints), ClusterKeys(config.etcd_prefix))
    await locator.start()
    router = ControllerRouter(locator, max_message_size=int(config.max_message_size))
    servicer = GatewayServicer(router, default_timeout_s=config.request_timeout_ms / 1000)
    server.add_service(add_GatewayServicer_to_server, servicer)

    async def close() -> None:
        await router.close()
        await locator.close()

    server.on_shutdown(close)


def main() -> None:
    raise SystemExit(
        run_service(GatewayConfig, "strom-gateway", build, description="Strom gateway")
    )


if __name__ == "__main__":
    main()

"""``python -m strom_controller`` / ``strom-controller``: run one controller.

Flags, ``STROM_*`` environment variables and a TOML file configure it (``--help`` lists every
setting; docs/controller.md explains them). It loads the cluster metadata from etcd, starts
serving (Metadata at once, admin RPCs once active), then campaigns for the active role.
"""

from __future__ import annotations

from strom.protocol.v1.controller_pb2_grpc import add_ControllerServicer_to_server
from strom_controller.config import ControllerConfig
from strom_controller.controller import Controller
from strom_controller.servicer import ControllerServicer
from strom_controller.stats import watch_controller
from strom_server.rpc.server import GrpcServer
from strom_server.runner import run_service
from strom_server.runtime.values import advertised_address


async def build(config: ControllerConfig, server: GrpcServer) -> None:
    controller = Controller(config)
    watch_controller(controller)
    server.add_service(add_ControllerServicer_to_server, ControllerServicer(controller))
    server.on_shutdown(controller.close)
    await server.start()  # the bound port goes into the leader key
    # Not ready (health NOT_SERVING) until the metadata is loaded from etcd.
    for name in ("", *server.service_names):
        await server.set_serving(name, False)
    address = advertised_address(config.listen, config.advertised_listen, server.port)
    await controller.start(*address)
    for name in ("", *server.service_names):
        await server.set_serving(name, True)


def main() -> None:
    raise SystemExit(
        run_service(ControllerConfig, "strom-controller", build, description="Strom controller")
    )


if __name__ == "__main__":
    main()

"""The gateway's Kafka-protocol listener (docs/kafka-compatibility.md)."""

from __future__ import annotations

import socket

from strom_gateway.coordinator_router import CoordinatorRouter
from strom_gateway.data_path import DataPath
from strom_gateway.kafka.backend import Backend
from strom_gateway.kafka.handlers import dispatcher
from strom_gateway.kafka.listener import KafkaListener
from strom_gateway.routing import ControllerRouter
from strom_server.runtime.values import split_host_port

__all__ = ["start_kafka_listener"]


async def start_kafka_listener(
    *,
    listen: str,
    advertised: str,
    router: ControllerRouter,
    coordinators: CoordinatorRouter,
    data: DataPath,
    timeout_s: float,
    max_frame_bytes: int,
) -> KafkaListener:
    """Bind the listener on ``listen`` and serve; clients are told ``advertised`` (empty: the
    bound address; a wildcard host becomes this machine's name)."""
    host, port = split_host_port(listen)
    backend = Backend(router, coordinators, data, host, port, timeout_s)
    listener = KafkaListener(
        dispatcher(backend), host=host or "0.0.0.0", port=port, max_frame_bytes=max_frame_bytes
    )
    bound = await listener.start()
    if advertised:
        backend.host, backend.port = split_host_port(advertised)
    else:
        wildcard = host in ("", "0.0.0.0", "::")
        backend.host, backend.port = (socket.gethostname() if wildcard else host), bound
    return listener

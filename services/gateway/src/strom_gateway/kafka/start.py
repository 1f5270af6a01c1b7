"""Start the Kafka listener: plaintext, or secured with TLS, SASL and per-principal backends."""

from __future__ import annotations

import socket

from strom_gateway.kafka.backend import Backend
from strom_gateway.kafka.handlers import dispatcher
from strom_gateway.kafka.listener import KafkaListener
from strom_gateway.kafka.principals import Routes, RoutesFactory, UserBackends
from strom_gateway.kafka.sasl import SaslServer
from strom_gateway.kafka.security import KAFKA_PROTOCOLS, KafkaSecurity, listener_protocol
from strom_server.runtime.logs import get_logger
from strom_server.runtime.values import split_host_port
from strom_server.security.http_tls import server_context
from strom_server.security.setup import ServerSecurity

log = get_logger(__name__)

__all__ = ["Routes", "start_kafka_listener"]


def _gate(security: ServerSecurity, base: Backend, routes: RoutesFactory) -> KafkaSecurity:
    """The secured listener's TLS, SASL and per-principal backends, from the gateway's own
    security settings (docs/security.md)."""
    config = security.config
    protocol = listener_protocol(config.security_protocol)
    tls = None
    if protocol == "SASL_SSL":
        tls = server_context(
            config.ssl_certfile, config.ssl_keyfile, config.ssl_cafile, config.ssl_client_auth
        )
    sasl = None
    if protocol != "PLAINTEXT":
        sasl = SaslServer(security.authenticator, security.store.credentials, plain=tls is not None)
    return KafkaSecurity(sasl, UserBackends(base, routes, security.channel_security), tls)


async def start_kafka_listener(
    *,
    listen: str,
    advertised: str,
    routes: Routes,
    routes_for: RoutesFactory,
    timeout_s: float,
    max_frame_bytes: int,
    security: ServerSecurity | None = None,
) -> KafkaListener | None:
    """Bind the listener on ``listen`` and serve; clients are told ``advertised`` (empty: the
    bound address; a wildcard host becomes this machine's name). ``routes`` are the
    gateway's own routers (calling as the gateway: what an unsecured gateway serves Kafka
    clients with); with ``security`` the listener follows the gateway's protocol (PLAINTEXT,
    SASL_PLAINTEXT or SASL_SSL) and calls through routers ``routes_for`` builds for each
    connection's principal instead. None (with a warning): the gateway's protocol is one the
    listener cannot serve (SSL without SASL)."""
    if security is not None and security.config.security_protocol.upper() not in KAFKA_PROTOCOLS:
        log.warning(
            "kafka-protocol listener not started",
            reason=f"security.protocol={security.config.security_protocol} has no SASL: the "
            "listener could not call the services as its clients",
        )
        return None
    host, port = split_host_port(listen)
    backend = Backend(routes.router, routes.coordinators, routes.data, host, port, timeout_s)
    gate = None if security is None else _gate(security, backend, routes_for)
    listener = KafkaListener(
        dispatcher(backend, secured=gate is not None),
        host=host or "0.0.0.0",
        port=port,
        max_frame_bytes=max_frame_bytes,
        tls=None if gate is None else gate.tls,
        gate=gate,
    )
    bound = await listener.start()
    if advertised:
        backend.host, backend.port = split_host_port(advertised)
    else:
        wildcard = host in ("", "0.0.0.0", "::")
        backend.host, backend.port = (socket.gethostname() if wildcard else host), bound
    return listener

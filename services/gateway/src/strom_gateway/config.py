"""Settings of a gateway process."""

from __future__ import annotations

from dataclasses import dataclass

from strom_server.runtime.config import ServerConfig, override, setting
from strom_server.runtime.values import ByteSize, HostPort, MiB, check_optional_host_port

__all__ = ["DEFAULT_KAFKA_LISTEN", "DEFAULT_LISTEN", "GatewayConfig"]

DEFAULT_LISTEN = "127.0.0.1:9092"
DEFAULT_KAFKA_LISTEN = "127.0.0.1:9192"


@dataclass(frozen=True, kw_only=True)
class GatewayConfig(ServerConfig):
    """A gateway's settings (docs/gateway.md)."""

    listen: HostPort = override(ServerConfig, "listen", DEFAULT_LISTEN)
    request_timeout_ms: int = setting(
        30000,
        help="how long a forwarded request may take, retries included, without a client deadline",
        min=100,
        max=600000,
    )
    max_inflight_bytes: ByteSize = setting(
        256 * MiB,
        help="record bytes being forwarded at once (produce requests, fetch responses); more "
        "waits: backpressure. A single request larger than this is refused",
        min=1 * MiB,
    )
    metadata_max_age_ms: int = setting(
        300000,
        help="how long partition leaders are cached without a leadership error refreshing them",
        min=100,
        max=86400000,
    )
    kafka_port: HostPort = setting(
        DEFAULT_KAFKA_LISTEN,
        help="host:port of the Kafka-protocol listener (docs/kafka-compatibility.md); port 0 "
        "picks a free port",
    )
    kafka_advertised: str = setting(
        "",
        help="host:port Kafka clients are told to connect to (Metadata, FindCoordinator); "
        "empty: the kafka-port address",
        check=check_optional_host_port,
    )

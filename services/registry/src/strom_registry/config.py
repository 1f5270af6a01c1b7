"""Settings of a schema registry instance.

Confluent's names where Confluent has the setting (``kafkastore.topic``,
``kafkastore.topic.replication.factor``, ``kafkastore.timeout.ms``,
``schema.compatibility.level``, ``leader.eligibility``); ``registry.session.timeout.ms`` is the
TTL of the writer's election lease; ``command-config`` names the client security settings
used on the ``_schemas`` topic (docs/schema-registry.md). The security settings every service
has secure the REST API: HTTPS, Basic authentication, the authorizer (strom_registry.access).
"""

from __future__ import annotations

from dataclasses import dataclass

from strom_registry.model import COMPATIBILITY_LEVELS
from strom_server.runtime.config import ServerConfig, setting
from strom_server.runtime.values import HostPort

__all__ = ["DEFAULT_LISTEN", "RegistryConfig"]

#: Confluent Schema Registry's port.
DEFAULT_LISTEN = "127.0.0.1:8081"
_INT_MAX = (1 << 31) - 1


def _check_url(text: str) -> str | None:
    if not text or text.startswith(("http://", "https://")):
        return None
    return "an http:// or https:// URL"


def _check_servers(text: str) -> str | None:
    return None if any(s.strip() for s in text.split(",")) else "at least one host:port"


@dataclass(frozen=True, kw_only=True)
class RegistryConfig(ServerConfig):
    """A registry instance's settings (docs/schema-registry.md explains each one)."""

    listen: HostPort = setting(
        DEFAULT_LISTEN, help="host:port the REST API listens on; port 0 picks a free port"
    )
    advertised_url: str = setting(
        "",
        help="URL other instances forward writes to (default: http:// + listen's host and the "
        "bound port)",
        check=_check_url,
    )
    instance_id: str = setting(
        "", help="this instance's name in the election (default: its advertised URL)"
    )
    bootstrap_servers: str = setting(
        "127.0.0.1:9092",
        help="the gateway(s) the registry reaches the cluster through, comma-separated",
        check=_check_servers,
    )
    kafkastore_topic: str = setting(
        "_schemas", name="kafkastore.topic", help="the compacted topic holding the schemas"
    )
    kafkastore_topic_replication_factor: int = setting(
        3, name="kafkastore.topic.replication.factor", help="replication factor of the "
        "schemas topic, capped by the live storage nodes at creation", min=1, max=32767,
    )  # fmt: skip
    kafkastore_timeout_ms: int = setting(
        30_000, name="kafkastore.timeout.ms", help="how long a read or write of the schemas "
        "topic may take before the request fails (50002)", min=1, max=_INT_MAX,
    )  # fmt: skip
    schema_compatibility_level: str = setting(
        "backward", name="schema.compatibility.level", help="the compatibility level of "
        "subjects without their own and no global one set", choices=[
            c.lower() for c in COMPATIBILITY_LEVELS],
    )  # fmt: skip
    leader_eligibility: bool = setting(
        True, name="leader.eligibility", help="whether this instance may become the writer"
    )
    command_config: str = setting(
        "",
        help="a Kafka-style properties file with the client security settings the registry "
        "reaches the cluster with (security.protocol, sasl.mechanism, sasl.username, "
        "sasl.password, ssl.cafile, ...), as `strom --command-config`; empty: plaintext",
    )
    session_timeout_ms: int = setting(
        9000, name="registry.session.timeout.ms", help="TTL of the writer's election lease: a "
        "dead writer is replaced within it", min=1000, max=600_000,
    )  # fmt: skip

    @property
    def lease_ttl_s(self) -> int:
        return max(1, round(self.session_timeout_ms / 1000))

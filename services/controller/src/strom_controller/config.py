"""Settings of a controller: identity, election lease, topic-creation defaults, automatic
leader rebalancing.

Kafka names are used where Kafka has the setting (``auto.create.topics.enable``,
``num.partitions``, ``default.replication.factor``, ``auto.leader.rebalance.enable``,
``leader.imbalance.*``); ``controller.session.timeout.ms`` is the TTL of the election lease.
``topic.config.defaults`` seeds the cluster-wide broker defaults of topic configs (the etcd key
``<prefix>/config/brokers``) the first time a controller becomes active; afterwards that key,
changed through IncrementalAlterConfigs, is the source of truth.
"""

from __future__ import annotations

from dataclasses import dataclass

from strom.topic_config import TopicConfig, parse_config_pairs
from strom_server.runtime.config import ServerConfig, override, setting
from strom_server.runtime.values import HostPort, check_optional_host_port

__all__ = ["DEFAULT_LISTEN", "ControllerConfig"]

DEFAULT_LISTEN = "127.0.0.1:9094"
_INT_MAX = (1 << 31) - 1


def _check_topic_defaults(items: tuple[str, ...]) -> str | None:
    try:
        TopicConfig.from_props(parse_config_pairs(items, "topic.config.defaults"))
    except ValueError as exc:  # ConfigurationError is a ValueError
        return str(exc)
    return None


@dataclass(frozen=True, kw_only=True)
class ControllerConfig(ServerConfig):
    """A controller's settings (docs/controller.md explains each one)."""

    listen: HostPort = override(ServerConfig, "listen", DEFAULT_LISTEN)
    controller_id: int = setting(
        1, help="this controller's id, unique among the controllers", min=0, max=_INT_MAX
    )
    advertised_listen: str = setting(
        "",
        help="host:port other processes reach this controller at (default: listen's host and "
        "the bound port)",
        check=check_optional_host_port,
    )
    session_timeout_ms: int = setting(
        6000,
        name="controller.session.timeout.ms",
        help="TTL of the election lease: a dead controller is replaced within about twice this",
        min=1000,
        max=600_000,
    )
    auto_create_topics_enable: bool = setting(
        True,
        name="auto.create.topics.enable",
        help="create a missing topic when a Metadata request allows it",
    )
    num_partitions: int = setting(
        1, name="num.partitions", help="partition count of topics created without one", min=1,
        max=_INT_MAX,
    )  # fmt: skip
    default_replication_factor: int = setting(
        1, name="default.replication.factor", help="replication factor of topics created without "
        "one", min=1, max=32767,
    )  # fmt: skip
    topic_config_defaults: tuple[str, ...] = setting(
        (),
        name="topic.config.defaults",
        help="cluster-wide topic config defaults as name=value (seeds <prefix>/config/brokers "
        "once)",
        check=_check_topic_defaults,
    )
    auto_leader_rebalance_enable: bool = setting(
        True,
        name="auto.leader.rebalance.enable",
        help="hand leadership back to preferred replicas when a broker's leader imbalance "
        "exceeds leader.imbalance.per.broker.percentage",
    )
    leader_imbalance_check_interval_seconds: int = setting(
        300,
        name="leader.imbalance.check.interval.seconds",
        help="how often the active controller checks the leader imbalance",
        min=1,
        max=_INT_MAX,
    )
    leader_imbalance_per_broker_percentage: int = setting(
        10,
        name="leader.imbalance.per.broker.percentage",
        help="a broker's share of preferred partitions it does not lead above which their "
        "leadership is moved back",
        min=0,
        max=100,
    )
    etcd_retry_backoff_max_ms: int = setting(
        2000, help="longest pause between retries while etcd is unreachable", min=10,
        max=60_000,
    )  # fmt: skip

    @property
    def lease_ttl_s(self) -> int:
        """The election lease TTL in whole seconds (etcd leases have second granularity)."""
        return max(1, round(self.session_timeout_ms / 1000))

    def broker_topic_defaults(self) -> dict[str, str]:
        return parse_config_pairs(self.topic_config_defaults, "topic.config.defaults")

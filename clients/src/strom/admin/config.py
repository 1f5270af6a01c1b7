"""The admin client's options, each declared once: name, type, default, check and meaning.

``AdminConfig`` is a frozen dataclass with one field per option of ``strom.Admin`` and
``strom.aio.Admin`` (the field's docstring is the option's meaning). Both constructors take
``bootstrap_servers`` and ``**options``, typed by ``AdminOptions`` (the other fields, as a
``TypedDict``), and build one ``AdminConfig``; tests keep the three equal and docs/clients.md
to them. A bad value raises ``ConfigurationError`` naming the option; ``bootstrap_servers`` is
normalised to a list.
"""

from __future__ import annotations

from dataclasses import dataclass

from strom.cluster.client_config import ClientConfig, CommonOptions
from strom.errors import ConfigurationError

__all__ = ["AdminConfig", "AdminOptions"]


@dataclass(frozen=True, kw_only=True, slots=True)
class AdminConfig(ClientConfig):
    """Every admin option (see the module docstring); checked when created.
    ``request_timeout_ms`` is also the time the controller may take (topic creation,
    elections)."""

    default_client_id = "strom-admin"

    default_api_timeout_ms: int = 60000
    """How long a group call (``list_consumer_group_offsets``, ``describe_consumer_groups``,
    ...) asks again while the coordinator is loading or moving (Kafka's
    ``default.api.timeout.ms``); each request still gets at most ``request_timeout_ms``."""
    gateway_only: bool = False
    """Reach the partition leaders through the gateway too (``list_offsets``,
    ``delete_records``), for networks where only it is reachable."""

    def __post_init__(self) -> None:
        ClientConfig.__post_init__(self)
        if not isinstance(self.gateway_only, bool):
            raise ConfigurationError(f"gateway_only must be a bool, got {self.gateway_only!r}")
        api = self.default_api_timeout_ms
        if isinstance(api, bool) or not isinstance(api, int) or api <= 0:
            raise ConfigurationError(f"default_api_timeout_ms must be an int > 0, got {api!r}")


class AdminOptions(CommonOptions, total=False):
    """The keyword options of ``strom.Admin`` and ``strom.aio.Admin``: the fields of
    ``AdminConfig`` but ``bootstrap_servers`` (their first parameter), with their types.
    Defaults, checks and meanings: ``AdminConfig``."""

    default_api_timeout_ms: int
    gateway_only: bool

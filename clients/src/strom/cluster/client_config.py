"""``ClientConfig``: the options every client shares, declared once: where the cluster is
(``bootstrap_servers``) and how to reach it (the seven security options of
``strom.security.SecurityConfig``, which it extends). ``ProducerConfig``, ``ConsumerConfig``
and ``AdminConfig`` extend it with their own options; ``ClientOptions`` is the same set as
keyword options."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from strom.cluster.client import DEFAULT_BOOTSTRAP_SERVERS, parse_servers
from strom.security.config import SecurityConfig, SecurityOptions

__all__ = ["ClientConfig", "ClientOptions"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ClientConfig(SecurityConfig):
    """The shared client options, checked when created (``bootstrap_servers`` becomes a
    list, the security names upper case)."""

    bootstrap_servers: str | Sequence[str] = DEFAULT_BOOTSTRAP_SERVERS
    """Gateway address(es), ``"h1:9092,h2:9092"`` or a list."""

    def __post_init__(self) -> None:
        # Named, not super(): a slots dataclass is a new class, without super()'s cell.
        SecurityConfig.__post_init__(self)
        object.__setattr__(self, "bootstrap_servers", parse_servers(self.bootstrap_servers))


class ClientOptions(SecurityOptions, total=False):
    """``ClientConfig``'s fields as keyword options."""

    bootstrap_servers: str | Sequence[str]

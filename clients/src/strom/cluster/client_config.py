"""``ClientConfig``: the options every client shares, declared once: where the cluster is
(``bootstrap_servers``), how to reach it (the seven security options of
``strom.security.SecurityConfig``, which it extends), the name it gives itself
(``client_id``) and how long one request may take (``request_timeout_ms``).
``ProducerConfig``, ``ConsumerConfig`` and ``AdminConfig`` extend it with their own options;
``ClientOptions`` is the same set as keyword options, ``CommonOptions`` the same without
``bootstrap_servers`` (for the clients that take it as their first parameter)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from strom.cluster.client import DEFAULT_BOOTSTRAP_SERVERS, parse_servers
from strom.errors import ConfigurationError
from strom.security.config import SecurityConfig, SecurityOptions

__all__ = ["ClientConfig", "ClientOptions", "CommonOptions"]

_MAX_INT32 = 2**31 - 1


@dataclass(frozen=True, kw_only=True, slots=True)
class ClientConfig(SecurityConfig):
    """The shared client options, checked when created (``bootstrap_servers`` becomes a
    list, the security names upper case)."""

    default_client_id = "strom-python"
    """What an empty ``client_id`` becomes (each client names its kind)."""

    bootstrap_servers: str | Sequence[str] = DEFAULT_BOOTSTRAP_SERVERS
    """Gateway address(es), ``"h1:9092,h2:9092"`` or a list."""
    client_id: str = ""
    """Sent with every request (group descriptions show it per member); empty: the client's
    kind, ``strom-producer``, ``strom-python`` (consumer) or ``strom-admin``."""
    request_timeout_ms: int = 30000
    """One request's deadline: a request without an answer for this long fails (retriable)."""

    def __post_init__(self) -> None:
        # Named, not super(): a slots dataclass is a new class, without super()'s cell.
        SecurityConfig.__post_init__(self)
        object.__setattr__(self, "bootstrap_servers", parse_servers(self.bootstrap_servers))
        if not isinstance(self.client_id, str):
            raise ConfigurationError(f"client_id must be a str, got {self.client_id!r}")
        if not self.client_id:
            object.__setattr__(self, "client_id", self.default_client_id)
        timeout = self.request_timeout_ms
        if isinstance(timeout, bool) or not isinstance(timeout, int):
            raise ConfigurationError(f"request_timeout_ms must be an int, got {timeout!r}")
        if not 1 <= timeout <= _MAX_INT32:
            raise ConfigurationError(
                f"request_timeout_ms must be between 1 and {_MAX_INT32}, got {timeout}"
            )


class CommonOptions(SecurityOptions, total=False):
    """``ClientConfig``'s fields but ``bootstrap_servers``, as keyword options."""

    client_id: str
    request_timeout_ms: int


class ClientOptions(CommonOptions, total=False):
    """``ClientConfig``'s fields as keyword options."""

    bootstrap_servers: str | Sequence[str]

"""Settings of a console process (flags, ``STROM_*`` environment, TOML; docs/console.md)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from strom.errors import ConfigurationError
from strom.security import SecurityConfig, command_config_options
from strom_server.runtime.config import ServerConfig, override, setting
from strom_server.runtime.values import HostPort

__all__ = ["DEFAULT_LISTEN", "ConsoleConfig"]

DEFAULT_LISTEN = "127.0.0.1:8080"


def _check_user(user: str) -> str | None:
    if user and (len(user) > 64 or not user.isprintable() or ":" in user):
        return "a user name is 1-64 printable characters without ':'"
    return None


@dataclass(frozen=True, kw_only=True)
class ConsoleConfig:
    """A console's settings."""

    listen: HostPort = setting(DEFAULT_LISTEN, help="host:port the web server listens on")
    bootstrap_servers: str = setting(
        "127.0.0.1:9092", help="the cluster's gateway address(es), comma-separated host:port"
    )
    read_only: bool = setting(
        False, help="refuse every change (HTTP 403) and hide the controls that make one"
    )
    user: str = setting(
        "", help="require a login with this user name (with --password-file)", check=_check_user
    )
    password_file: Path = setting(
        "", help="file whose first line is the login password (needed with --user)"
    )
    command_config: str = setting(
        "",
        help="a Kafka-style properties file with the client security settings the console "
        "reaches the cluster with (security.protocol, sasl.mechanism, sasl.username, "
        "sasl.password, ssl.cafile, ...), as `strom --command-config`; a secure one needs "
        "--user (login); empty: plaintext",
    )
    schema_registry_url: str = setting(
        "",
        help="the schema registry (http://host:8081) for the read-only schemas pages; empty: none",
    )
    request_timeout_ms: int = setting(
        15000, help="deadline of each call to the cluster", min=100, max=600000
    )
    metadata_cache_s: float = setting(
        60.0,
        help="the overview, topics and groups pages serve the sampler's latest snapshot while "
        "it is younger than this, else wait for a new sample; 0: every such page waits for one",
        min=0.0,
        max=3600.0,
    )
    sample_interval_s: float = setting(
        10.0,
        help="how often the console samples end offsets and group offsets (rates, lag history)",
        min=0.2,
        max=3600.0,
    )
    lag_window_s: float = setting(
        3600.0, help="how long the lag history kept for each group reaches back", min=1.0
    )
    lag_groups_max: int = setting(
        2000, help="most groups whose lag the sampler follows (the first by name)", min=1
    )
    lag_groups_per_sample: int = setting(
        250,
        help="most groups whose committed offsets one sample asks (in turn; the others keep "
        "their last ones until their turn)",
        min=1,
    )
    max_page_size: int = setting(
        500, help="largest page size of the message browser (records per partition)", min=1
    )
    display_bytes: int = setting(
        4096, help="bytes of a key, value or header shown before it is cut", min=16
    )
    search_max_records: int = setting(1_000_000, help="most records one search may scan", min=1)
    search_max_seconds: float = setting(120.0, help="longest a search may run", min=1.0, max=3600.0)
    # The settings every server has, with their checks (a bad --metrics-listen is a
    # configuration error, exit 2, not a traceback at start-up).
    log_level: str = override(ServerConfig, "log_level", "info")
    log_format: str = override(ServerConfig, "log_format", "json")
    metrics_listen: str = override(ServerConfig, "metrics_listen", "0")

    def __post_init__(self) -> None:
        # A bad --command-config or login is a configuration error (exit 2), found at load.
        self.login_password(self.security_options())

    def security_options(self) -> dict[str, Any]:
        """The clients' security options from ``command_config`` ({} without one);
        ConfigurationError naming the file for a bad one."""
        if not self.command_config:
            return {}
        return command_config_options(
            self.command_config, f"--command-config {self.command_config}"
        )

    def password(self) -> str | None:
        """The login password (first line of ``password_file``), None when login is off."""
        if not self.user:
            return None
        return self.password_file.read_text(encoding="utf-8").splitlines()[0]

    def login_password(self, security: dict[str, Any]) -> str | None:
        """The login password, None without a login; ``ConfigurationError`` when it cannot be
        read, or when ``security`` (the clients' options) reaches a secure cluster without a
        login in front of the pages."""
        if not self.user:
            if SecurityConfig(**security).enabled:
                raise ConfigurationError(
                    "--command-config connects the console to a secure cluster as a privileged "
                    "user: set --user and --password-file so that its pages need a login"
                )
            return None
        if str(self.password_file) in ("", "."):
            raise ConfigurationError("--user needs --password-file (a file whose first line is it)")
        try:
            password = self.password()
        except (OSError, IndexError, UnicodeDecodeError) as exc:
            raise ConfigurationError(
                f"--password-file {self.password_file}: cannot read a password from it ({exc})"
            ) from None
        if not password:
            raise ConfigurationError(f"--password-file {self.password_file}: the password is empty")
        return password

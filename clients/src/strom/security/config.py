"""Client security settings with Kafka's names, and Kafka-style properties files.

``SecurityConfig`` holds ``security_protocol`` (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL),
``sasl_mechanism`` (SCRAM-SHA-256, SCRAM-SHA-512), ``sasl_plain_username``,
``sasl_plain_password``, ``ssl_cafile``, ``ssl_certfile`` and ``ssl_keyfile``; each client's
config inherits the seven options (``strom.cluster.ClientConfig`` extends this class) and
``SecurityConfig.of(config)`` takes them out of it.
``read_properties`` reads a ``--command-config`` file (``security.protocol=SASL_SSL``, ...).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, TypedDict

from strom.errors import ConfigurationError

__all__ = [
    "PROTOCOLS",
    "SECURITY_OPTION_NAMES",
    "SecurityConfig",
    "SecurityOptions",
    "properties_to_options",
    "read_properties",
    "security_of",
]

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")

# Properties-file keys (Kafka's, and the short sasl.username/sasl.password) -> option names.
_PROPERTY_KEYS = {
    "security.protocol": "security_protocol",
    "sasl.mechanism": "sasl_mechanism",
    "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password",
    "sasl.plain.username": "sasl_plain_username",
    "sasl.plain.password": "sasl_plain_password",
    "ssl.cafile": "ssl_cafile",
    "ssl.certfile": "ssl_certfile",
    "ssl.keyfile": "ssl_keyfile",
    "ssl.truststore.location": "ssl_cafile",
}


@dataclass(frozen=True, kw_only=True, slots=True)
class SecurityConfig:
    """How a client connects: TLS files and SASL credentials (docs/security.md)."""

    security_protocol: str = "PLAINTEXT"
    """``PLAINTEXT``, ``SSL``, ``SASL_PLAINTEXT`` (loopback only) or ``SASL_SSL``
    (docs/security.md)."""
    sasl_mechanism: str = "SCRAM-SHA-256"
    """``SCRAM-SHA-256`` or ``SCRAM-SHA-512``."""
    sasl_plain_username: str | None = None
    """The SCRAM user (SASL protocols)."""
    sasl_plain_password: str | None = None
    """The SCRAM user's password (SASL protocols)."""
    ssl_cafile: str | None = None
    """CA bundle (PEM) to trust; None: the system's."""
    ssl_certfile: str | None = None
    """Client certificate (PEM), for mutual TLS."""
    ssl_keyfile: str | None = None
    """The client certificate's key (PEM)."""

    def __post_init__(self) -> None:
        protocol = str(self.security_protocol).upper()
        if protocol not in PROTOCOLS:
            raise ConfigurationError(
                f"security_protocol must be one of {', '.join(PROTOCOLS)}, "
                f"got {self.security_protocol!r}"
            )
        object.__setattr__(self, "security_protocol", protocol)
        mechanism = str(self.sasl_mechanism).upper()
        if mechanism not in _MECHANISMS:
            raise ConfigurationError(
                f"sasl_mechanism must be one of {', '.join(_MECHANISMS)}, "
                f"got {self.sasl_mechanism!r}"
            )
        object.__setattr__(self, "sasl_mechanism", mechanism)
        if self.sasl and not (self.sasl_plain_username and self.sasl_plain_password is not None):
            raise ConfigurationError(
                f"security_protocol {protocol} needs sasl_plain_username and sasl_plain_password"
            )
        for name in ("ssl_cafile", "ssl_certfile", "ssl_keyfile"):
            path = getattr(self, name)
            if path is not None and not Path(path).is_file():
                raise ConfigurationError(f"{name}: no such file: {path}")
        if (self.ssl_certfile is None) != (self.ssl_keyfile is None):
            raise ConfigurationError("ssl_certfile and ssl_keyfile go together")

    @property
    def tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    @property
    def enabled(self) -> bool:
        return self.security_protocol != "PLAINTEXT"

    @classmethod
    def of(cls, config: Any) -> SecurityConfig:
        """The security options of a client config (any object with the seven attributes)."""
        return cls(**{f.name: getattr(config, f.name) for f in fields(cls)})


class SecurityOptions(TypedDict, total=False):
    """The fields of ``SecurityConfig`` as keyword options (every client takes them)."""

    security_protocol: str
    sasl_mechanism: str
    sasl_plain_username: str | None
    sasl_plain_password: str | None
    ssl_cafile: str | None
    ssl_certfile: str | None
    ssl_keyfile: str | None


def security_of(config: Any) -> SecurityConfig | None:
    """A client config's security options; None when they are all defaults (plaintext: the
    process's default channels)."""
    security = SecurityConfig.of(config)
    return None if security == SecurityConfig() else security


#: The seven option names, as every client config declares them.
SECURITY_OPTION_NAMES = tuple(f.name for f in fields(SecurityConfig))


def read_properties(path: str | Path) -> dict[str, str]:
    """A Kafka-style properties file: ``key=value`` (or ``key: value``) lines, ``#``/``!``
    comments. ConfigurationError naming the file and line for anything else."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ConfigurationError(f"cannot read {path}: {exc.strerror or exc}") from None
    values: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if cut <= 0:
            raise ConfigurationError(f"{path}:{number}: expected key=value, got {raw!r}")
        values[line[:cut].strip()] = line[cut + 1 :].strip()
    return values


def properties_to_options(properties: Mapping[str, str]) -> dict[str, str]:
    """Client options (``security_protocol=...``) from properties (``security.protocol=...``);
    keys already in option form pass through, unknown keys are ignored (a properties file may
    hold settings for other tools)."""
    options: dict[str, str] = {}
    names = set(SECURITY_OPTION_NAMES)
    for key, value in properties.items():
        name = _PROPERTY_KEYS.get(key.strip().lower())
        if name is None and key in names:
            name = key
        if name is not None:
            options[name] = value
    return options


def command_config_options(path: str | Path, what: str | None = None) -> dict[str, str]:
    """The client security options of a ``--command-config`` properties file, validated;
    ConfigurationError naming ``what`` (default: the file) for a bad one."""
    options = properties_to_options(read_properties(path))
    try:
        SecurityConfig(**options)  # type: ignore[arg-type]
    except ConfigurationError as exc:
        raise ConfigurationError(f"{what or path}: {exc}") from None
    return options

"""Typed service settings, declared once and loaded from defaults, a TOML file, env vars and flags.

A service declares its settings as fields of a frozen, keyword-only dataclass, each made with
``setting()`` (default, help, and optional range, choices or check), usually extending
``ServerConfig``, which holds the settings every server shares::

    @dataclass(frozen=True, kw_only=True)
    class StorageConfig(ServerConfig):
        listen: HostPort = override(ServerConfig, "listen", "127.0.0.1:9093")
        log_dirs: tuple[str, ...] = setting(("data",), help="directories holding partition logs")
        segment_bytes: ByteSize = setting(1 * GiB, name="segment.bytes", min=14, help="...")

    config = load_config(StorageConfig)          # parses sys.argv[1:] and os.environ

Sources, in increasing precedence: the built-in default < the TOML file named by ``--config`` (or
``STROM_CONFIG``) < the environment variable ``STROM_<NAME>`` < the command-line flag
``--<name>``. A setting's name defaults to its field name with dashes (``etcd-endpoints``); its
env var upper-cases the name and turns dots and dashes into underscores
(``STROM_ETCD_ENDPOINTS``). In the TOML file a setting may be written with dashes, underscores
or as a dotted key / table (``[etcd] endpoints = [...]``); any key that names no setting is an
error. Every bad value raises ``InvalidSettingError`` (a ``ConfigurationError``) naming the
option, the source and the value.

Supported field types: ``bool``, ``int``, ``float``, ``str``, ``pathlib.Path``, ``ByteSize``,
``HostPort``, ``Endpoint`` and ``tuple[X, ...]`` of the scalar ones (comma lists in text).
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import math
import os
import re
import sys
import tomllib
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from strom.errors import ConfigurationError
from strom_server.runtime.values import (
    ByteSize,
    Endpoint,
    GiB,
    HostPort,
    KiB,
    MiB,
    format_byte_size,
    parse_bool,
    parse_byte_size,
    parse_endpoint,
    parse_host_port,
    parse_list,
    split_host_port,
)

__all__ = [
    "CONFIG_ENV_VAR",
    "ENV_PREFIX",
    "InvalidSettingError",
    "ServerConfig",
    "SettingSpec",
    "build_arg_parser",
    "config_items",
    "load_config",
    "override",
    "setting",
    "settings_of",
]

ENV_PREFIX = "STROM_"
CONFIG_ENV_VAR = "STROM_CONFIG"
_META_KEY = "strom.setting"
_RESERVED = frozenset({"config", "help"})

C = TypeVar("C")


class InvalidSettingError(ConfigurationError):
    """A setting's value is malformed or out of range; names the option, source and value."""

    def __init__(self, option: str, source: str, value: object, reason: str) -> None:
        super().__init__(f"{source}: invalid value {value!r} for option '{option}': {reason}")
        self.option = option
        self.source = source
        self.value = value
        self.reason = reason


@dataclass(frozen=True)
class _SettingMeta:
    help: str
    name: str | None
    min: float | None
    max: float | None
    choices: tuple[str, ...] | None
    check: Callable[[Any], str | None] | None


def setting(
    default: Any,
    *,
    help: str,
    name: str | None = None,
    min: float | None = None,
    max: float | None = None,
    choices: Iterable[str] | None = None,
    check: Callable[[Any], str | None] | None = None,
) -> Any:
    """Declare one setting as a dataclass field.

    ``min``/``max`` bound numbers (inclusive); ``choices`` lists the allowed strings (matched
    case-insensitively, stored as written here); ``check`` gets the parsed value and returns an
    error description or None. ``name`` overrides the flag/file name (``"segment.bytes"``).
    """
    if isinstance(default, list):
        default = tuple(default)
    meta = _SettingMeta(
        help=help,
        name=name,
        min=min,
        max=max,
        choices=tuple(choices) if choices is not None else None,
        check=check,
    )
    return dataclasses.field(default=default, metadata={_META_KEY: meta})


def override(base: type, field_name: str, default: Any) -> Any:
    """Redeclare ``base``'s setting ``field_name`` in a subclass with a new default."""
    for f in dataclasses.fields(base):
        if f.name == field_name and _META_KEY in f.metadata:
            return dataclasses.field(default=default, metadata=f.metadata)
    raise TypeError(f"{base.__name__} has no setting named {field_name!r}")


@dataclass(frozen=True)
class SettingSpec:
    """Everything known about one setting, derived from its field (see ``settings_of``)."""

    field: str
    name: str
    key: str
    env: str
    flags: tuple[str, ...]
    type: Any
    default: Any
    help: str
    min: float | None
    max: float | None
    choices: tuple[str, ...] | None
    check: Callable[[Any], str | None] | None

    def describe_default(self) -> str:
        return _format_value(self.type, self.default)


def _normalize_key(name: str) -> str:
    return re.sub(r"[.\-]", "_", name).lower()


_SPEC_CACHE: dict[type, tuple[SettingSpec, ...]] = {}


def settings_of(cls: type) -> tuple[SettingSpec, ...]:
    """The settings a config dataclass declares, in field order."""
    cached = _SPEC_CACHE.get(cls)
    if cached is not None:
        return cached
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls.__name__} is not a dataclass")
    hints = typing.get_type_hints(cls)
    specs: list[SettingSpec] = []
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        meta = f.metadata.get(_META_KEY)
        if meta is None:
            raise TypeError(f"{cls.__name__}.{f.name} must be declared with setting()")
        _element_type(hints[f.name])  # rejects unsupported types early
        name = meta.name or f.name.replace("_", "-")
        key = _normalize_key(name)
        if key in _RESERVED:
            raise TypeError(f"{cls.__name__}.{f.name}: the name {name!r} is reserved")
        flags = tuple(dict.fromkeys((f"--{name}", f"--{name.replace('.', '-')}")))
        specs.append(
            SettingSpec(
                field=f.name,
                name=name,
                key=key,
                env=ENV_PREFIX + key.upper(),
                flags=flags,
                type=hints[f.name],
                default=f.default,
                help=meta.help,
                min=meta.min,
                max=meta.max,
                choices=meta.choices,
                check=meta.check,
            )
        )
    result = tuple(specs)
    _SPEC_CACHE[cls] = result
    return result


# --- typed conversion ----------------------------------------------------------------------

_SCALARS: dict[Any, tuple[str, Callable[[str], Any]]] = {
    bool: ("a boolean", parse_bool),
    int: ("an integer", lambda text: int(text.strip())),
    float: ("a number", lambda text: _finite(float(text.strip()))),
    str: ("a string", str),
    Path: ("a path", Path),
    ByteSize: ("a byte size", parse_byte_size),
    HostPort: ("host:port", parse_host_port),
    Endpoint: ("an endpoint [http://]host:port", parse_endpoint),
}


def _finite(value: float) -> float:
    if not math.isfinite(value):
        raise ValueError("not a finite number")
    return value


def _element_type(tp: Any) -> tuple[bool, Any]:
    """(is_list, scalar type) of a field annotation; TypeError when unsupported."""
    if typing.get_origin(tp) is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis and args[0] in _SCALARS:
            return True, args[0]
    elif tp in _SCALARS:
        return False, tp
    raise TypeError(f"unsupported setting type {tp!r}")


def _scalar_from(tp: Any, raw: object) -> Any:
    """Convert one scalar from text or a TOML-native value; ValueError on mismatch."""
    what, parse = _SCALARS[tp]
    if isinstance(raw, str):
        try:
            return parse(raw)
        except ValueError as exc:
            reason = str(exc) if tp in (bool, ByteSize, HostPort, Endpoint) else ""
            raise ValueError(reason or f"expected {what}") from None
    if tp is bool and isinstance(raw, bool):
        return raw
    if tp in (int, ByteSize) and isinstance(raw, int) and not isinstance(raw, bool):
        return raw
    if tp is float and isinstance(raw, int | float) and not isinstance(raw, bool):
        if math.isfinite(raw):
            return float(raw)
        raise ValueError(f"expected {what}, got {raw}")
    raise ValueError(f"expected {what}, got {type(raw).__name__}")


def _convert(spec: SettingSpec, raw: object) -> Any:
    is_list, scalar = _element_type(spec.type)
    if not is_list:
        return _scalar_from(scalar, raw)
    if isinstance(raw, str):
        items: list[object] = list(parse_list(raw))
    elif isinstance(raw, list | tuple):
        items = list(raw)
    else:
        raise ValueError(f"expected a list, got {type(raw).__name__}")
    values = []
    for item in items:
        try:
            values.append(_scalar_from(scalar, item))
        except ValueError as exc:
            raise ValueError(f"item {item!r}: {exc}") from None
    return tuple(values)


def _validate(spec: SettingSpec, value: Any) -> Any:
    """Range, choices and custom check; returns the (canonical) value or raises ValueError."""
    if spec.choices is not None and isinstance(value, str):
        matches = [c for c in spec.choices if c.lower() == value.lower()]
        if not matches:
            raise ValueError("expected one of " + ", ".join(spec.choices))
        value = matches[0]
    if isinstance(value, int | float) and not isinstance(value, bool):
        if spec.min is not None and value < spec.min:
            raise ValueError(f"must be at least {_format_value(spec.type, spec.min)}")
        if spec.max is not None and value > spec.max:
            raise ValueError(f"must be at most {_format_value(spec.type, spec.max)}")
    if spec.check is not None:
        problem = spec.check(value)
        if problem:
            raise ValueError(problem)
    return value


def _resolve(spec: SettingSpec, raw: object, source: str) -> Any:
    try:
        return _validate(spec, _convert(spec, raw))
    except ValueError as exc:
        raise InvalidSettingError(spec.name, source, raw, str(exc)) from None


def _format_value(tp: Any, value: Any) -> str:
    if typing.get_origin(tp) is tuple:
        return ",".join(str(v) for v in value)
    if tp is ByteSize and isinstance(value, int):
        return format_byte_size(value)
    if isinstance(value, bool):
        return str(value).lower()
    if value == "":
        return '""'
    return str(value)


# --- sources -------------------------------------------------------------------------------


_METAVARS = {
    int: "N",
    float: "NUMBER",
    str: "TEXT",
    Path: "PATH",
    ByteSize: "SIZE",
    HostPort: "HOST:PORT",
    Endpoint: "HOST:PORT",
}


def build_arg_parser(
    cls: type, *, prog: str | None = None, description: str | None = None
) -> argparse.ArgumentParser:
    """The argparse parser of ``cls``'s settings plus ``--config``; absent flags stay absent."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description=description,
        argument_default=argparse.SUPPRESS,
        allow_abbrev=False,
        exit_on_error=False,
    )
    parser.add_argument(
        "--config",
        metavar="PATH",
        help=f"TOML file with settings (env {CONFIG_ENV_VAR}); flags and env vars override it",
    )
    for spec in settings_of(cls):
        text = f"{spec.help} (default: {spec.describe_default()}; env {spec.env})".replace(
            "%", "%%"
        )
        is_list, scalar = _element_type(spec.type)
        if scalar is bool and not is_list:
            parser.add_argument(
                *spec.flags, dest=spec.field, action=argparse.BooleanOptionalAction, help=text
            )
        elif is_list:
            metavar = f"{_METAVARS.get(scalar, 'VALUE')},..."
            parser.add_argument(
                *spec.flags, dest=spec.field, action="append", metavar=metavar, help=text
            )
        else:
            metavar = "{" + ",".join(spec.choices) + "}" if spec.choices else _METAVARS[scalar]
            parser.add_argument(*spec.flags, dest=spec.field, metavar=metavar, help=text)
    return parser


def _flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in table.items():
        path = f"{prefix}.{key}" if prefix else key
        if isinstance(value, dict):
            flat.update(_flatten(value, path))
        else:
            flat[path] = value
    return flat


def _read_toml(path: Path, specs: Sequence[SettingSpec]) -> dict[str, tuple[str, Any]]:
    """field -> (key as written, raw value) from a TOML file; unknown keys are errors."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigurationError(f"config file {path}: cannot read it: {exc.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigurationError(f"config file {path}: not valid TOML: {exc}") from None
    by_key = {spec.key: spec for spec in specs}
    found: dict[str, tuple[str, Any]] = {}
    for written, value in _flatten(data).items():
        spec = by_key.get(_normalize_key(written))
        if spec is None:
            hint = difflib.get_close_matches(written, [s.name for s in specs], n=1)
            suffix = f" (did you mean '{hint[0]}'?)" if hint else ""
            raise ConfigurationError(f"config file {path}: unknown setting '{written}'{suffix}")
        if spec.field in found:
            raise ConfigurationError(
                f"config file {path}: setting '{spec.name}' is given twice "
                f"('{found[spec.field][0]}' and '{written}')"
            )
        found[spec.field] = (written, value)
    return found


def load_config(
    cls: type[C],
    argv: Sequence[str] | None = None,
    env: Mapping[str, str] | None = None,
    *,
    prog: str | None = None,
    description: str | None = None,
) -> C:
    """Build ``cls`` from defaults < TOML file < ``STROM_*`` env vars < flags.

    ``argv`` defaults to ``sys.argv[1:]`` and ``env`` to ``os.environ``. ``--help`` prints the
    settings and exits 0. Raises ``ConfigurationError`` on any bad or unknown input.
    """
    specs = settings_of(cls)
    argv = sys.argv[1:] if argv is None else list(argv)
    env = os.environ if env is None else env
    parser = build_arg_parser(cls, prog=prog, description=description)
    try:
        namespace, extra = parser.parse_known_args(argv)
    except argparse.ArgumentError as exc:
        raise ConfigurationError(f"command line: {exc}") from None
    if extra:
        raise ConfigurationError("command line: unknown argument(s): " + " ".join(extra))
    flags = vars(namespace)

    values: dict[str, Any] = {}
    for spec in specs:
        values[spec.field] = _resolve(spec, spec.default, f"built-in default of {cls.__name__}")

    config_path = flags.pop("config", None) or env.get(CONFIG_ENV_VAR)
    if config_path:
        for field, (written, raw) in _read_toml(Path(config_path), specs).items():
            spec = next(s for s in specs if s.field == field)
            values[field] = _resolve(spec, raw, f"config file {config_path} (key '{written}')")
    for spec in specs:
        if spec.env in env:
            values[spec.field] = _resolve(spec, env[spec.env], f"environment variable {spec.env}")
    for spec in specs:
        if spec.field in flags:
            raw = flags[spec.field]
            if isinstance(raw, list):  # a repeatable list flag: each occurrence is a comma list
                raw = ",".join(raw)
            values[spec.field] = _resolve(spec, raw, f"flag {spec.flags[0]}")
    return cls(**values)


def config_items(config: object) -> dict[str, Any]:
    """``{setting name: value}`` of a loaded config, e.g. to log it at start-up."""
    return {spec.name: getattr(config, spec.field) for spec in settings_of(type(config))}


# --- the settings every server shares ------------------------------------------------------


def _check_etcd_prefix(prefix: str) -> str | None:
    if not re.fullmatch(r"(/[A-Za-z0-9._\-]+)+", prefix):
        return "expected a key prefix such as /strom (starts with '/', no trailing '/')"
    return None


def _check_metrics_listen(text: str) -> str | None:
    if text.strip() in ("", "0") or text.strip().isdigit():
        return None if int(text.strip() or 0) <= 65535 else "a port is at most 65535"
    try:
        split_host_port(text)
    except ValueError as exc:
        return f"expected 0 (off), a port, or host:port: {exc}"
    return None


def _check_otlp_endpoint(text: str) -> str | None:
    if not text:
        return None
    try:
        parse_endpoint(text)
    except ValueError as exc:
        return f"expected empty (off) or [http://]host:port: {exc}"
    return None


@dataclass(frozen=True, kw_only=True)
class ServerConfig:
    """Settings every Strom server shares; services subclass it with their own fields."""

    # RUF009 cannot tell that setting() returns a dataclass field (like dataclasses.field).
    listen: HostPort = setting(
        "127.0.0.1:0", help="host:port the gRPC server listens on; port 0 picks a free port"
    )
    etcd_endpoints: tuple[Endpoint, ...] = setting(
        ("127.0.0.1:2379",), help="etcd client endpoints, comma-separated host:port"
    )
    etcd_prefix: str = setting(
        "/strom", help="prefix of every etcd key Strom writes", check=_check_etcd_prefix
    )
    log_level: str = setting(
        "info", help="log threshold", choices=("debug", "info", "warning", "error", "critical")
    )
    log_format: str = setting(
        "json", help="json lines (services) or console (people)", choices=("json", "console")
    )
    metrics_listen: str = setting(
        "0",
        help="Prometheus scrape endpoint: 0 = off, a port on 127.0.0.1, or host:port",
        check=_check_metrics_listen,
    )
    otlp_endpoint: str = setting(
        "",
        help="OTLP/gRPC collector for traces and metrics (http://host:4317); empty = off",
        check=_check_otlp_endpoint,
    )
    max_message_size: ByteSize = setting(
        ByteSize(64 * MiB),
        help="largest gRPC message received or sent",
        min=1 * KiB,
        max=2 * GiB - 1,
    )
    shutdown_grace: float = setting(
        10.0, help="seconds in-flight RPCs get to finish on SIGTERM/SIGINT", min=0.0, max=3600.0
    )
    # Security (docs/security.md): off by default.
    security_protocol: str = setting(
        "PLAINTEXT",
        name="security.protocol",
        help="the listener's and outgoing calls' protocol",
        choices=("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"),
    )
    ssl_certfile: str = setting("", name="ssl.certfile", help="certificate chain (PEM)")
    ssl_keyfile: str = setting("", name="ssl.keyfile", help="private key (PEM)")
    ssl_cafile: str = setting("", name="ssl.cafile", help="CA bundle to trust (PEM)")
    ssl_client_auth: str = setting(
        "none",
        name="ssl.client.auth",
        help="ask clients for certificates",
        choices=("none", "requested", "required"),
    )
    authorizer_enabled: bool = setting(
        False, name="authorizer.enabled", help="check every request against the ACLs"
    )
    super_users: tuple[str, ...] = setting(
        (), name="super.users", help="principals allowed everything (User:admin,...)"
    )
    allow_everyone_if_no_acl_found: bool = setting(
        False,
        name="allow.everyone.if.no.acl.found",
        help="allow requests on resources no ACL names",
    )
    etcd_ssl_cafile: str = setting(
        "",
        name="etcd.ssl.cafile",
        help="reach etcd over TLS trusting this CA (PEM), with ssl.certfile/keyfile as the "
        "client certificate; empty: plaintext",
    )
    token_lifetime_ms: int = setting(
        900_000,
        name="token.lifetime.ms",
        help="how long a login token is valid",
        min=1000,
        max=86_400_000,
    )

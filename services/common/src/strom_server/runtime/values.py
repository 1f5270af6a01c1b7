"""Parsers for setting values given as text: booleans, byte sizes, host:port addresses.

Each parser takes a string and returns the typed value, or raises ``ValueError`` whose message
says what was expected; ``strom_server.runtime.config`` wraps that into a
``ConfigurationError`` naming the option and where the value came from.

Byte sizes accept a plain number of bytes or a number with a unit: ``B``, decimal ``KB MB GB TB``
(powers of 1000) and binary ``KiB MiB GiB TiB`` (powers of 1024), case-insensitive, an optional
space between: ``65536``, ``64KiB``, ``64 MiB``, ``1.5GiB``.
"""

from __future__ import annotations

import re
import socket
from typing import NewType

__all__ = [
    "ByteSize",
    "Endpoint",
    "GiB",
    "HostPort",
    "KiB",
    "MiB",
    "format_byte_size",
    "parse_bool",
    "parse_byte_size",
    "parse_endpoint",
    "parse_host_port",
    "parse_list",
    "split_endpoint",
    "split_host_port",
]

ByteSize = NewType("ByteSize", int)
"""An ``int`` number of bytes that settings parse from text such as ``64MiB``."""

HostPort = NewType("HostPort", str)
"""A ``host:port`` string (``[v6]:port`` for IPv6 literals), validated when parsed."""

Endpoint = NewType("Endpoint", str)
"""A ``host:port`` a client connects to, optionally written ``http://host:port``."""

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB

_UNITS = {
    "": 1,
    "b": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "tb": 1000**4,
    "kib": KiB,
    "mib": MiB,
    "gib": GiB,
    "tib": 1024 * GiB,
}
_BYTE_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


def parse_bool(text: str) -> bool:
    """``true/false``, ``yes/no``, ``on/off`` or ``1/0``, case-insensitive."""
    folded = text.strip().lower()
    if folded in _TRUE:
        return True
    if folded in _FALSE:
        return False
    raise ValueError("expected a boolean (true/false, yes/no, on/off, 1/0)")


def parse_byte_size(text: str) -> int:
    """A byte count from ``65536``, ``64KiB``, ``64 MB``, ``1.5GiB`` (see the module docstring)."""
    match = _BYTE_SIZE.match(text)
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _UNITS:
        raise ValueError("expected a byte size such as 1048576, 64KiB, 64MiB or 1GB")
    value = float(match.group(1)) * _UNITS[unit]
    if value != int(value):
        raise ValueError("a byte size must be a whole number of bytes")
    return int(value)


def format_byte_size(size: int) -> str:
    """The shortest exact binary spelling of ``size``: ``67108864`` -> ``64MiB``."""
    for unit, factor in (("TiB", 1024 * GiB), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if size and size % factor == 0:
            return f"{size // factor}{unit}"
    return str(size)


def split_host_port(text: str) -> tuple[str, int]:
    """``"host:port"`` or ``"[::1]:port"`` -> ``(host, port)``; raises ``ValueError``.

    The host may be empty (``":9092"``), which a server reads as every interface.
    """
    rest = text.strip()
    if rest.startswith("["):
        host, sep, port_text = rest[1:].partition("]:")
        if not sep:
            raise ValueError("expected [ipv6-address]:port")
    else:
        host, sep, port_text = rest.rpartition(":")
        if not sep or ":" in host or "/" in host:
            raise ValueError("expected host:port (IPv6 literals as [addr]:port)")
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError("expected a port number between 0 and 65535 after the colon")
    if any(ch.isspace() for ch in host):
        raise ValueError("a host name cannot contain spaces")
    return host, int(port_text)


def check_optional_host_port(text: str) -> str | None:
    """A ``setting(check=...)`` for an optional ``host:port`` (empty = unset): the problem or
    None."""
    if not text:
        return None
    try:
        split_host_port(text)
    except ValueError as exc:
        return str(exc)
    return None


def advertised_address(listen: str, advertised_listen: str, bound_port: int) -> tuple[str, int]:
    """Where other processes reach a server: ``advertised_listen`` when set, else the listen
    host (this machine's name for a wildcard address) and the port actually bound."""
    if advertised_listen:
        return split_host_port(advertised_listen)
    host, _ = split_host_port(listen)
    if host in ("", "0.0.0.0", "::"):
        host = socket.gethostname()
    return host, bound_port


def split_endpoint(text: str) -> tuple[str, int]:
    """Like ``split_host_port`` but also accepts an ``http://`` or ``https://`` prefix."""
    rest = text.strip()
    for scheme in ("http://", "https://"):
        if rest.startswith(scheme):
            rest = rest[len(scheme) :].rstrip("/")
            break
    return split_host_port(rest)


def parse_host_port(text: str) -> str:
    """Validate ``host:port`` and return it without surrounding spaces."""
    split_host_port(text)
    return text.strip()


def parse_endpoint(text: str) -> str:
    """Validate ``[http://]host:port`` and return it without surrounding spaces."""
    split_endpoint(text)
    return text.strip()


def parse_list(text: str) -> tuple[str, ...]:
    """A comma-separated list; blanks around items and empty items are dropped."""
    return tuple(item.strip() for item in text.split(",") if item.strip())

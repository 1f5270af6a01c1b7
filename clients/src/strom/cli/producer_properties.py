"""Kafka producer property names (``linger.ms=20``) as ``strom.Producer`` keyword arguments.

``strom.Producer`` takes Kafka's option names in snake_case (docs/clients.md), so a property
maps to the argument named by its dots turned into underscores, with its value parsed from
text. Only the properties the producer has are accepted; any other name (a Kafka property
Strom does not have, such as ``key.serializer``, or a typo) is refused with its name, as are
values that do not parse. Range checks stay with the producer (``ConfigurationError``), whose
messages ``kafka_names`` turns back into the property names the user typed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from strom.errors import ConfigurationError

__all__ = ["PRODUCER_PROPERTIES", "kafka_names", "parse_producer_properties"]


def _int(text: str) -> int:
    return int(text)


def _number(text: str) -> float | int:
    try:
        return int(text)
    except ValueError:
        return float(text)


def _bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError(text)
    return lowered == "true"


def _acks(text: str) -> int | str:
    lowered = text.strip().lower()
    if lowered in ("all", "-1"):
        return "all"
    if lowered in ("0", "1"):
        return int(lowered)
    raise ValueError(text)


def _str(text: str) -> str:
    return text


#: Kafka property -> (its description for errors, parser); the argument is the name with
#: "." turned into "_".
PRODUCER_PROPERTIES: dict[str, tuple[str, Callable[[str], Any]]] = {
    "acks": ("all, -1, 0 or 1", _acks),
    "batch.size": ("an integer", _int),
    "bootstrap.servers": ("host:port[,host:port...]", _str),
    "buffer.memory": ("an integer", _int),
    "client.id": ("a string", _str),
    "compression.type": ("none, gzip, snappy, lz4 or zstd", _str),
    "delivery.timeout.ms": ("an integer", _int),
    "enable.idempotence": ("true or false", _bool),
    "linger.ms": ("a number", _number),
    "max.block.ms": ("an integer", _int),
    "max.in.flight.requests.per.connection": ("an integer", _int),
    "max.request.size": ("an integer", _int),
    "metadata.max.age.ms": ("an integer", _int),
    "request.timeout.ms": ("an integer", _int),
    "retries": ("an integer", _int),
    "retry.backoff.ms": ("an integer", _int),
    "transaction.timeout.ms": ("an integer", _int),
    "transactional.id": ("a string", _str),
}


def parse_producer_properties(pairs: Iterable[str]) -> dict[str, Any]:
    """``["acks=1", "linger.ms=20"]`` -> ``{"acks": 1, "linger_ms": 20}``; the last of a
    repeated property wins. Raises ``ConfigurationError`` naming the offending property."""
    kwargs: dict[str, Any] = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        name = name.strip()
        if not sep or not name:
            raise ConfigurationError(f"expected a producer property NAME=VALUE, got {pair!r}")
        known = PRODUCER_PROPERTIES.get(name)
        if known is None:
            raise ConfigurationError(
                f"unknown producer property {name!r} (supported: "
                f"{', '.join(sorted(PRODUCER_PROPERTIES))})"
            )
        expected, parse = known
        try:
            kwargs[name.replace(".", "_")] = parse(text.strip())
        except ValueError:
            raise ConfigurationError(
                f"producer property {name}: expected {expected}, got {text!r}"
            ) from None
    return kwargs


_ARGUMENTS = re.compile(
    r"\b("
    + "|".join(sorted((n.replace(".", "_") for n in PRODUCER_PROPERTIES), key=len, reverse=True))
    + r")\b"
)


def kafka_names(message: str) -> str:
    """A producer error message with its argument names as properties (``linger_ms`` ->
    ``linger.ms``)."""
    return _ARGUMENTS.sub(lambda m: m.group(1).replace("_", "."), message)

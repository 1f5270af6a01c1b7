"""Producer options: names, defaults and validation (Kafka's producer configs, snake_case).

Every bad value raises ``ConfigurationError`` naming the option. ``enable_idempotence``
resolves here, as in Kafka since 3.0 (KIP-679): left unset (None) it is on unless ``acks``,
``max_in_flight_requests_per_connection`` or ``retries`` conflict with it (then off, said once
in the log); set to True with such a conflict it is an error.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from strom.cluster import parse_servers
from strom.errors import ConfigurationError
from strom.producer.partitioner import Partitioner
from strom.records import Compression

__all__ = ["DEFAULT_BUFFER_MEMORY", "DEFAULT_MAX_REQUEST_SIZE", "ProducerConfig"]

DEFAULT_BUFFER_MEMORY = 32 * 1024 * 1024
DEFAULT_MAX_REQUEST_SIZE = 1024 * 1024
_MAX_INT32 = (1 << 31) - 1
_ACKS = {"all": -1, "-1": -1, -1: -1, 0: 0, "0": 0, 1: 1, "1": 1}
_MAX_IN_FLIGHT_IDEMPOTENT = 5

log = logging.getLogger("strom.producer")

Serializer = Callable[[Any], bytes | None]


@dataclass(frozen=True, slots=True)
class ProducerConfig:
    bootstrap_servers: list[str]
    acks: int
    enable_idempotence: bool
    compression: Compression
    linger_ms: float
    batch_size: int
    buffer_memory: int
    max_block_ms: int
    retries: int
    retry_backoff_ms: int
    delivery_timeout_ms: int
    request_timeout_ms: int
    max_in_flight: int
    max_request_size: int
    metadata_max_age_ms: int
    partitioner: Partitioner | None
    key_serializer: Serializer | None
    value_serializer: Serializer | None
    client_id: str

    @classmethod
    def create(
        cls,
        *,
        bootstrap_servers: str | Sequence[str],
        acks: int | str,
        enable_idempotence: bool | None,
        compression_type: str | None,
        linger_ms: float,
        batch_size: int,
        buffer_memory: int,
        max_block_ms: int,
        retries: int,
        retry_backoff_ms: int,
        delivery_timeout_ms: int,
        request_timeout_ms: int,
        max_in_flight_requests_per_connection: int,
        max_request_size: int,
        metadata_max_age_ms: int,
        partitioner: Partitioner | None,
        key_serializer: Serializer | None,
        value_serializer: Serializer | None,
        client_id: str,
    ) -> ProducerConfig:
        servers = parse_servers(bootstrap_servers)
        key = acks.lower() if isinstance(acks, str) else acks
        if isinstance(key, bool) or key not in _ACKS:
            raise ConfigurationError(f"acks must be 'all', -1, 0 or 1, got {acks!r}")
        ack = _ACKS[key]
        if enable_idempotence is not None and not isinstance(enable_idempotence, bool):
            raise ConfigurationError(
                f"enable_idempotence must be a bool or None, got {enable_idempotence!r}"
            )
        try:
            compression = Compression.from_name(compression_type or "none")
        except (ConfigurationError, ValueError, KeyError):
            raise ConfigurationError(
                f"compression_type must be one of none, gzip, lz4, zstd, got {compression_type!r}"
            ) from None
        if compression == Compression.SNAPPY:
            raise ConfigurationError(
                "compression_type='snappy' is not supported by strom.records; use lz4, zstd or gzip"
            )
        _number("linger_ms", linger_ms, 0, 86_400_000)
        _integer("batch_size", batch_size, 1, _MAX_INT32)
        _integer("buffer_memory", buffer_memory, 1, 1 << 40)
        _integer("max_block_ms", max_block_ms, 0, _MAX_INT32)
        _integer("retries", retries, 0, _MAX_INT32)
        _integer("retry_backoff_ms", retry_backoff_ms, 0, _MAX_INT32)
        _integer("delivery_timeout_ms", delivery_timeout_ms, 1, _MAX_INT32)
        _integer("request_timeout_ms", request_timeout_ms, 1, _MAX_INT32)
        _integer(
            "max_in_flight_requests_per_connection", max_in_flight_requests_per_connection, 1, 1000
        )
        _integer("max_request_size", max_request_size, 1, _MAX_INT32)
        _integer("metadata_max_age_ms", metadata_max_age_ms, 0, _MAX_INT32)
        if delivery_timeout_ms < linger_ms + request_timeout_ms:
            raise ConfigurationError(
                f"delivery_timeout_ms ({delivery_timeout_ms}) must be >= linger_ms + "
                f"request_timeout_ms ({linger_ms} + {request_timeout_ms})"
            )
        idempotent = _resolve_idempotence(
            enable_idempotence, ack, acks, max_in_flight_requests_per_connection, retries
        )
        for name, fn in (
            ("partitioner", partitioner),
            ("key_serializer", key_serializer),
            ("value_serializer", value_serializer),
        ):
            if fn is not None and not callable(fn):
                raise ConfigurationError(f"{name} must be callable or None, got {fn!r}")
        if not isinstance(client_id, str):
            raise ConfigurationError(f"client_id must be a str, got {client_id!r}")
        return cls(
            bootstrap_servers=servers,
            acks=ack,
            enable_idempotence=idempotent,
            compression=compression,
            linger_ms=float(linger_ms),
            batch_size=batch_size,
            buffer_memory=buffer_memory,
            max_block_ms=max_block_ms,
            retries=retries,
            retry_backoff_ms=retry_backoff_ms,
            delivery_timeout_ms=delivery_timeout_ms,
            request_timeout_ms=request_timeout_ms,
            max_in_flight=max_in_flight_requests_per_connection,
            max_request_size=max_request_size,
            metadata_max_age_ms=metadata_max_age_ms,
            partitioner=partitioner,
            key_serializer=key_serializer,
            value_serializer=value_serializer,
            client_id=client_id,
        )


def _resolve_idempotence(
    wanted: bool | None, ack: int, acks: int | str, max_in_flight: int, retries: int
) -> bool:
    """Whether the producer is idempotent. Unset (None): yes unless a setting conflicts, then
    no, logged once (Kafka's KIP-679); True with a conflict raises ``ConfigurationError``
    naming the setting."""
    if wanted is False:
        return False
    conflicts: list[tuple[str, str]] = []  # (what is set, what idempotence needs)
    if ack != -1:
        conflicts.append((f"acks={acks!r}", "acks='all'"))
    if max_in_flight > _MAX_IN_FLIGHT_IDEMPOTENT:
        conflicts.append((
            f"max_in_flight_requests_per_connection={max_in_flight}",
            f"max_in_flight_requests_per_connection <= {_MAX_IN_FLIGHT_IDEMPOTENT}",
        ))  # fmt: skip
    if retries == 0:
        conflicts.append(("retries=0", "retries > 0"))
    if not conflicts:
        return True
    settings = " and ".join(setting for setting, _ in conflicts)
    if wanted:
        needs = " and ".join(needed for _, needed in conflicts)
        raise ConfigurationError(
            f"enable_idempotence=True requires {needs}, got {settings} "
            "(or leave enable_idempotence unset, or pass False)"
        )
    log.info(
        "idempotence disabled because %s; set enable_idempotence=False to silence this", settings
    )
    return False


def _integer(name: str, value: object, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigurationError(f"{name} must be an int, got {value!r}")
    if not low <= value <= high:
        raise ConfigurationError(f"{name} must be between {low} and {high}, got {value}")


def _number(name: str, value: object, low: float, high: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigurationError(f"{name} must be a number, got {value!r}")
    if not low <= value <= high:
        raise ConfigurationError(f"{name} must be between {low} and {high}, got {value}")

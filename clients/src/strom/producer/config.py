"""The producer's options, each declared once: name, type, default, check and meaning.

``ProducerConfig`` is a frozen dataclass with one field per option of ``strom.Producer`` and
``strom.aio.Producer`` (Kafka's producer configs in snake_case; the field's docstring is the
option's meaning). Both constructors take ``bootstrap_servers`` and ``**options``, typed by
``ProducerOptions`` (the other fields, as a ``TypedDict``), and build one ``ProducerConfig``
from them. Tests keep ``ProducerOptions``, the constructors and the option table of
docs/clients.md equal to the fields.

Every bad value raises ``ConfigurationError`` naming the option, before anything connects.
After the checks the fields hold normalised values: ``bootstrap_servers`` a list, ``acks``
-1, 0 or 1, ``linger_ms`` a float and ``enable_idempotence`` resolved, as in Kafka since 3.0
(KIP-679): left unset (None) it is on unless ``acks``, ``max_in_flight_requests_per_connection``
or ``retries`` conflict with it (then off, said once in the log); True with such a conflict is
an error.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from strom.cluster.client_config import ClientConfig, CommonOptions
from strom.errors import ConfigurationError
from strom.producer.partitioner import Partitioner
from strom.records import Compression

__all__ = [
    "DEFAULT_BUFFER_MEMORY",
    "DEFAULT_MAX_REQUEST_SIZE",
    "ProducerConfig",
    "ProducerOptions",
    "Serializer",
]

DEFAULT_BUFFER_MEMORY = 32 * 1024 * 1024
DEFAULT_MAX_REQUEST_SIZE = 1024 * 1024
_MAX_INT32 = (1 << 31) - 1
_ACKS = {"all": -1, "-1": -1, -1: -1, 0: 0, "0": 0, 1: 1, "1": 1}
_MAX_IN_FLIGHT_IDEMPOTENT = 5
#: Transactional ids the coordinators use internally (refused for applications).
RESERVED_TRANSACTIONAL_ID_PREFIX = "__strom_"

log = logging.getLogger("strom.producer")

#: ``key_serializer`` / ``value_serializer``: an object to ``bytes`` (or None).
Serializer = Callable[[Any], bytes | None]


@dataclass(frozen=True, kw_only=True, slots=True)
class ProducerConfig(ClientConfig):
    """Every producer option (see the module docstring); checked when created."""

    default_client_id = "strom-producer"

    acks: int | str = "all"
    """``"all"``/-1: every in-sync replica; 1: the leader; 0: no acknowledgement."""
    enable_idempotence: bool | None = None
    """Producer id and sequence numbers, so retries neither duplicate nor reorder. None: on
    unless ``acks``, ``retries`` or ``max_in_flight_requests_per_connection`` conflict."""
    compression_type: str | None = "lz4"
    """``"none"``, ``"gzip"``, ``"snappy"``, ``"lz4"`` or ``"zstd"``."""
    linger_ms: float = 5
    """How long a batch that is not full waits for more records."""
    batch_size: int = 16384
    """Bytes per partition batch (one larger record gets a batch of its own)."""
    buffer_memory: int = DEFAULT_BUFFER_MEMORY
    """Bound on the bytes of records sent but not yet completed; ``send`` blocks while full."""
    max_block_ms: int = 60000
    """Longest ``send``/``send_many`` blocks (full buffer, unknown metadata)."""
    retries: int = 2147483647
    """Re-sends of a batch after a retriable error (bounded by ``delivery_timeout_ms``)."""
    retry_backoff_ms: int = 100
    """Wait before a retry, and between metadata refreshes."""
    delivery_timeout_ms: int = 120000
    """Bound from ``send`` to success or failure (>= ``linger_ms + request_timeout_ms``)."""
    max_in_flight_requests_per_connection: int = 5
    """Pipelined produce requests per storage node."""
    max_request_size: int = DEFAULT_MAX_REQUEST_SIZE
    """Largest request; a larger record is refused by ``send``."""
    metadata_max_age_ms: int = 300000
    """Cached metadata is refreshed at least this often."""
    partitioner: Partitioner | None = None
    """``(topic, key_bytes, num_partitions) -> partition``, replacing the default."""
    key_serializer: Serializer | None = None
    """Turns keys into ``bytes`` (otherwise pass bytes-like objects or None)."""
    value_serializer: Serializer | None = None
    """Turns values into ``bytes`` (otherwise pass bytes-like objects or None)."""
    gateway_only: bool = False
    """Send everything through the gateway, for networks where only it is reachable."""
    transactional_id: str | None = None
    """Makes the producer transactional (``init_transactions``, ``begin_transaction``, ...):
    the id that survives restarts, fencing older producers with the same id. Implies
    idempotence (``acks='all'``, ``max_in_flight_requests_per_connection <= 5``)."""
    transaction_timeout_ms: int = 60000
    """How long the transaction coordinator lets a transaction stay open before aborting it
    (at most the server's ``transaction.max.timeout.ms``, 900000 by default)."""

    def __post_init__(self) -> None:
        ClientConfig.__post_init__(self)
        set_ = object.__setattr__
        acks = self.acks
        key = acks.lower() if isinstance(acks, str) else acks
        if isinstance(key, bool) or key not in _ACKS:
            raise ConfigurationError(f"acks must be 'all', -1, 0 or 1, got {acks!r}")
        ack = _ACKS[key]
        enable_idempotence = self.enable_idempotence
        if enable_idempotence is not None and not isinstance(enable_idempotence, bool):
            raise ConfigurationError(
                f"enable_idempotence must be a bool or None, got {enable_idempotence!r}"
            )
        self.compression  # noqa: B018 -- checks compression_type
        _number("linger_ms", self.linger_ms, 0, 86_400_000)
        _integer("batch_size", self.batch_size, 1, _MAX_INT32)
        _integer("buffer_memory", self.buffer_memory, 1, 1 << 40)
        _integer("max_block_ms", self.max_block_ms, 0, _MAX_INT32)
        _integer("retries", self.retries, 0, _MAX_INT32)
        _integer("retry_backoff_ms", self.retry_backoff_ms, 0, _MAX_INT32)
        _integer("delivery_timeout_ms", self.delivery_timeout_ms, 1, _MAX_INT32)
        max_in_flight = self.max_in_flight_requests_per_connection
        _integer("max_in_flight_requests_per_connection", max_in_flight, 1, 1000)
        _integer("max_request_size", self.max_request_size, 1, _MAX_INT32)
        _integer("metadata_max_age_ms", self.metadata_max_age_ms, 0, _MAX_INT32)
        if self.delivery_timeout_ms < self.linger_ms + self.request_timeout_ms:
            raise ConfigurationError(
                f"delivery_timeout_ms ({self.delivery_timeout_ms}) must be >= linger_ms + "
                f"request_timeout_ms ({self.linger_ms} + {self.request_timeout_ms})"
            )
        transactional = _check_transactional(
            self.transactional_id, self.transaction_timeout_ms, enable_idempotence
        )
        idempotent = _resolve_idempotence(
            True if transactional else enable_idempotence,
            ack,
            acks,
            max_in_flight,
            self.retries,
            what="transactional_id" if transactional else "enable_idempotence=True",
        )
        for name, fn in (
            ("partitioner", self.partitioner),
            ("key_serializer", self.key_serializer),
            ("value_serializer", self.value_serializer),
        ):
            if fn is not None and not callable(fn):
                raise ConfigurationError(f"{name} must be callable or None, got {fn!r}")
        if not isinstance(self.gateway_only, bool):
            raise ConfigurationError(f"gateway_only must be a bool, got {self.gateway_only!r}")
        set_(self, "acks", ack)
        set_(self, "enable_idempotence", idempotent)
        set_(self, "linger_ms", float(self.linger_ms))

    @property
    def compression(self) -> Compression:
        """``compression_type`` as a ``Compression``."""
        try:
            return Compression.from_name(self.compression_type or "none")
        except (ConfigurationError, ValueError, KeyError):
            raise ConfigurationError(
                "compression_type must be one of none, gzip, snappy, lz4, zstd, "
                f"got {self.compression_type!r}"
            ) from None


class ProducerOptions(CommonOptions, total=False):
    """The keyword options of ``strom.Producer`` and ``strom.aio.Producer``: the fields of
    ``ProducerConfig`` but ``bootstrap_servers`` (their first parameter), with their types.
    Defaults, checks and meanings: ``ProducerConfig``."""

    acks: int | str
    enable_idempotence: bool | None
    compression_type: str | None
    linger_ms: float
    batch_size: int
    buffer_memory: int
    max_block_ms: int
    retries: int
    retry_backoff_ms: int
    delivery_timeout_ms: int
    max_in_flight_requests_per_connection: int
    max_request_size: int
    metadata_max_age_ms: int
    partitioner: Partitioner | None
    key_serializer: Serializer | None
    value_serializer: Serializer | None
    gateway_only: bool
    transactional_id: str | None
    transaction_timeout_ms: int


def _check_transactional(
    transactional_id: object, timeout_ms: object, enable_idempotence: bool | None
) -> bool:
    """Whether the producer is transactional; ``ConfigurationError`` for a bad id or timeout,
    or for ``enable_idempotence=False`` with a transactional id (Kafka refuses it too)."""
    _integer("transaction_timeout_ms", timeout_ms, 1, _MAX_INT32)
    if transactional_id is None:
        return False
    if not isinstance(transactional_id, str) or not transactional_id:
        raise ConfigurationError(
            f"transactional_id must be a non-empty str or None, got {transactional_id!r}"
        )
    if transactional_id.startswith(RESERVED_TRANSACTIONAL_ID_PREFIX):
        raise ConfigurationError(
            f"transactional_id {transactional_id!r}: ids starting with "
            f"{RESERVED_TRANSACTIONAL_ID_PREFIX!r} are reserved for Strom's coordinators"
        )
    if enable_idempotence is False:
        raise ConfigurationError(
            "transactional_id requires idempotence: leave enable_idempotence unset or True"
        )
    return True


def _resolve_idempotence(
    wanted: bool | None,
    ack: int,
    acks: int | str,
    max_in_flight: int,
    retries: int,
    *,
    what: str = "enable_idempotence=True",
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
        hint = (
            " (or leave enable_idempotence unset, or pass False)"
            if what.startswith("enable_idempotence")
            else ""
        )
        raise ConfigurationError(f"{what} requires {needs}, got {settings}{hint}")
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

"""The source and sink options, parsed and checked once, on the driver, before any I/O.

Names and meanings follow Spark's Kafka source (``docs/spark.md`` has the table); option keys
are case-insensitive, as Spark's. Errors are ``ValueError`` with the option's name in the text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from strom.security.config import properties_to_options
from strom.types import TopicPartition

if TYPE_CHECKING:
    from strom_spark.avro_values import AvroValueFormat

__all__ = [
    "AT_LEAST_ONCE",
    "EARLIEST",
    "EXACTLY_ONCE",
    "LATEST",
    "Bound",
    "SinkOptions",
    "SourceOptions",
    "ValueFormatOptions",
    "parse_sink_options",
    "parse_source_options",
    "parse_value_format",
]

#: The per-partition JSON's special offsets, as in Spark's Kafka source.
EARLIEST = -2
LATEST = -1

BOOTSTRAP = "strom.bootstrap.servers"


@dataclass(frozen=True, slots=True)
class Bound:
    """Where a range starts or ends: ``earliest``/``latest`` for every partition, explicit
    offsets per partition (-2 earliest, -1 latest; unlisted partitions take ``default``), or
    timestamps (one for all partitions, or per partition)."""

    kind: Literal["earliest", "latest", "offsets", "timestamp", "timestamps"]
    offsets: Mapping[TopicPartition, int] | None = None
    timestamp: int | None = None
    default: int = EARLIEST
    #: what a timestamp without a record at or after it means: "error" or "latest"
    no_match: Literal["error", "latest"] = "error"


@dataclass(frozen=True, slots=True)
class SourceOptions:
    bootstrap_servers: str
    subscribe: tuple[str, ...] | None
    subscribe_pattern: str | None
    assign: tuple[TopicPartition, ...] | None
    starting: Bound
    ending: Bound
    min_partitions: int | None
    max_records_per_partition: int | None
    fail_on_data_loss: bool
    include_headers: bool
    max_offsets_per_trigger: int | None
    fetch_max_bytes: int
    request_timeout_ms: int
    #: "read_uncommitted" (default) or "read_committed" (``kafka.isolation.level``).
    isolation_level: str = "read_uncommitted"
    #: ``valueFormat=avro``: the reader schema, resolved on the driver (``strom_spark.source``).
    value_avro: AvroValueFormat | None = None
    #: Client security options (``strom.security.protocol``, ...: ``security_options``).
    security: dict[str, str] = field(default_factory=dict)

    @property
    def read_committed(self) -> bool:
        return self.isolation_level == "read_committed"


#: ``deliveryGuarantee`` values.
AT_LEAST_ONCE = "at_least_once"
EXACTLY_ONCE = "exactly_once"
#: ``transactionalIdPrefix`` of batch writes when none is given.
DEFAULT_BATCH_PREFIX = "strom-spark"
#: ``transactionTimeoutMs`` when none is given: the server's default
#: ``transaction.max.timeout.ms`` (the longest a staged transaction may wait for the job).
DEFAULT_TRANSACTION_TIMEOUT_MS = 900_000
_PREFIX_CHARS = re.compile(r"[A-Za-z0-9._-]+")


@dataclass(frozen=True, slots=True)
class SinkOptions:
    bootstrap_servers: str
    topic: str | None
    producer: dict[str, int | str]
    #: ``at_least_once`` (default) or ``exactly_once`` (``deliveryGuarantee``).
    delivery_guarantee: str = AT_LEAST_ONCE
    #: Names the write's transactions (exactly_once only; required for streaming).
    transactional_id_prefix: str = DEFAULT_BATCH_PREFIX
    #: Lifetime of a task's staged transaction (exactly_once only).
    transaction_timeout_ms: int = DEFAULT_TRANSACTION_TIMEOUT_MS
    #: ``valueFormat=avro``: the writer schema, resolved on the driver (``strom_spark.source``).
    value_avro: AvroValueFormat | None = None
    #: Client security options (``strom.security.protocol``, ...: ``security_options``).
    security: dict[str, str] = field(default_factory=dict)

    @property
    def exactly_once(self) -> bool:
        return self.delivery_guarantee == EXACTLY_ONCE


def security_options(raw: Mapping[str, str]) -> dict[str, str]:
    """The client security options among the Spark options (empty: plaintext): the keys of a
    ``--command-config`` properties file (``strom.security.properties_to_options``) under
    ``strom.`` or ``kafka.`` (as Spark's Kafka source spells them; ``strom.`` wins)."""
    options = _lower(raw)
    properties: dict[str, str] = {}
    for prefix in ("kafka.", "strom."):
        properties.update(
            {key[len(prefix) :]: value for key, value in options.items() if key.startswith(prefix)}
        )
    return properties_to_options(properties)


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items()}


def _int(options: dict[str, str], name: str, minimum: int) -> int | None:
    raw = options.get(name.lower())
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"option {name} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise ValueError(f"option {name} must be >= {minimum}, got {value}")
    return value


def _bool(options: dict[str, str], name: str, default: bool) -> bool:
    raw = options.get(name.lower())
    if raw is None:
        return default
    if raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    raise ValueError(f"option {name} must be true or false, got {raw!r}")


def _json_partitions(name: str, raw: str) -> dict[TopicPartition, int]:
    """``{"topic": {"0": 12, "1": -2}}`` as ``{TopicPartition: int}``."""
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"option {name} is not valid JSON ({exc.msg}): {raw!r}") from None
    if not isinstance(parsed, dict) or not parsed:
        raise ValueError(f'option {name} must be a JSON object like {{"topic": {{"0": 42}}}}')
    found: dict[TopicPartition, int] = {}
    for topic, partitions in parsed.items():
        if not isinstance(partitions, dict):
            raise ValueError(f"option {name}: the value of {topic!r} must be an object")
        for partition, value in partitions.items():
            try:
                number = int(partition)
            except ValueError:
                raise ValueError(
                    f"option {name}: {partition!r} is not a partition number"
                ) from None
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"option {name}: {topic}-{partition} must be an integer")
            found[TopicPartition(topic, number)] = value
    return found


def _assign(raw: str) -> tuple[TopicPartition, ...]:
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"option assign is not valid JSON ({exc.msg}): {raw!r}") from None
    if not isinstance(parsed, dict) or not parsed:
        raise ValueError('option assign must be a JSON object like {"topic": [0, 1]}')
    out: list[TopicPartition] = []
    for topic, partitions in parsed.items():
        if not isinstance(partitions, list) or not all(
            isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in partitions
        ):
            raise ValueError(f"option assign: {topic!r} needs a list of partition numbers")
        out.extend(TopicPartition(topic, p) for p in partitions)
    return tuple(sorted(set(out)))


def _bound(options: dict[str, str], side: Literal["starting", "ending"], streaming: bool) -> Bound:
    """The bound named by ``{side}Timestamp``, ``{side}OffsetsByTimestamp`` or
    ``{side}Offsets``, in that order of precedence (as Spark's)."""
    default = EARLIEST if side == "starting" else LATEST
    strategy = options.get(f"{side}offsetsbytimestampstrategy", "error").lower()
    if strategy not in ("error", "latest"):
        raise ValueError(
            f"option {side}OffsetsByTimestampStrategy must be error or latest, got {strategy!r}"
        )
    no_match: Literal["error", "latest"] = "latest" if strategy == "latest" else "error"
    if side == "ending":
        no_match = "latest"  # an end without records after it is the end of the log
    single = _int(options, f"{side}Timestamp", 0)
    if single is not None:
        return Bound("timestamp", timestamp=single, no_match=no_match)
    raw = options.get(f"{side}offsetsbytimestamp")
    if raw is not None:
        stamps = _json_partitions(f"{side}OffsetsByTimestamp", raw)
        if any(v < 0 for v in stamps.values()):
            raise ValueError(f"option {side}OffsetsByTimestamp: timestamps must be >= 0")
        return Bound("timestamps", offsets=stamps, default=default, no_match=no_match)
    raw = options.get(f"{side}offsets")
    name = f"{side}Offsets"
    if raw is None:
        return Bound("latest" if side == "ending" or streaming else "earliest")
    if raw.strip().lower() in ("earliest", "latest"):
        kind = raw.strip().lower()
        if side == "starting" and kind == "latest" and not streaming:
            raise ValueError("option startingOffsets=latest is not allowed for a batch query")
        if side == "ending" and kind == "earliest":
            raise ValueError("option endingOffsets=earliest is not allowed")
        return Bound("earliest" if kind == "earliest" else "latest")
    offsets = _json_partitions(name, raw)
    for tp, value in offsets.items():
        if value < EARLIEST:
            raise ValueError(f"option {name}: {tp.topic}-{tp.partition} has offset {value}")
        if side == "starting" and value == LATEST and not streaming:
            raise ValueError(f"option {name}: -1 (latest) is not allowed for a batch query")
        if side == "ending" and value == EARLIEST:
            raise ValueError(f"option {name}: -2 (earliest) is not allowed as an end")
    return Bound("offsets", offsets=offsets, default=default)


def parse_source_options(raw: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    """Check the read options (``streaming``: for ``spark.readStream``)."""
    options = _lower(raw)
    bootstrap = options.get(BOOTSTRAP, "").strip()
    if not bootstrap:
        raise ValueError(f"option {BOOTSTRAP} is required (the gateway, e.g. localhost:9092)")
    given = [name for name in ("subscribe", "subscribepattern", "assign") if name in options]
    if len(given) != 1:
        raise ValueError(
            "exactly one of the options subscribe, subscribePattern, assign is required"
            + (f" (got {', '.join(given)})" if given else "")
        )
    subscribe = pattern = assign = None
    if "subscribe" in options:
        subscribe = tuple(t.strip() for t in options["subscribe"].split(",") if t.strip())
        if not subscribe:
            raise ValueError("option subscribe needs at least one topic")
    elif "subscribepattern" in options:
        pattern = options["subscribepattern"]
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"option subscribePattern is not a valid regex: {exc}") from None
    else:
        assign = _assign(options["assign"])
    if streaming and any(
        f"ending{suffix}" in options for suffix in ("offsets", "timestamp", "offsetsbytimestamp")
    ):
        raise ValueError("ending offsets are not allowed for a streaming query")
    return SourceOptions(
        security=security_options(raw),
        bootstrap_servers=bootstrap,
        subscribe=subscribe,
        subscribe_pattern=pattern,
        assign=assign,
        starting=_bound(options, "starting", streaming),
        ending=Bound("latest") if streaming else _bound(options, "ending", streaming),
        min_partitions=_int(options, "minPartitions", 1),
        max_records_per_partition=_int(options, "maxRecordsPerPartition", 1),
        fail_on_data_loss=_bool(options, "failOnDataLoss", True),
        include_headers=_bool(options, "includeHeaders", False),
        max_offsets_per_trigger=_int(options, "maxOffsetsPerTrigger", 1),
        fetch_max_bytes=_int(options, "strom.fetch.max.bytes", 1024) or 8 << 20,
        request_timeout_ms=_int(options, "strom.request.timeout.ms", 1) or 30000,
        isolation_level=_isolation_level(options),
    )


#: The isolation level's option names: Spark's Kafka source passes ``kafka.isolation.level``
#: to its consumer; ``isolationLevel`` is the camelCase alias of this reader's other options.
_ISOLATION_OPTIONS = ("kafka.isolation.level", "isolationLevel")


def _isolation_level(options: dict[str, str]) -> str:
    given = {
        name: options[name.lower()].strip().lower()
        for name in _ISOLATION_OPTIONS
        if name.lower() in options
    }
    for name, value in given.items():
        if value not in ("read_uncommitted", "read_committed"):
            raise ValueError(
                f"option {name} must be read_uncommitted or read_committed, got {value!r}"
            )
    if len(set(given.values())) > 1:
        raise ValueError(
            "options kafka.isolation.level and isolationLevel disagree: "
            + ", ".join(f"{k}={v}" for k, v in given.items())
        )
    return next(iter(given.values()), "read_uncommitted")


#: Producer settings a writer may pass as ``strom.<name>`` (acks and idempotence are fixed).
_PRODUCER_INTS = ("linger.ms", "batch.size", "max.request.size", "delivery.timeout.ms",
                  "request.timeout.ms", "buffer.memory", "max.block.ms")  # fmt: skip
_PRODUCER_STRS = ("compression.type", "client.id")


def parse_sink_options(raw: Mapping[str, str], *, streaming: bool = False) -> SinkOptions:
    """Check the write options (``streaming``: for ``writeStream``)."""
    options = _lower(raw)
    bootstrap = options.get(BOOTSTRAP, "").strip()
    if not bootstrap:
        raise ValueError(f"option {BOOTSTRAP} is required (the gateway, e.g. localhost:9092)")
    for fixed in ("strom.acks", "strom.enable.idempotence"):
        if fixed in options:
            raise ValueError(f"option {fixed} is fixed by the connector (acks=all, idempotent)")
    producer: dict[str, int | str] = {}
    for name in _PRODUCER_INTS:
        value = _int(options, f"strom.{name}", 0)
        if value is not None:
            producer[name.replace(".", "_")] = value
    for name in _PRODUCER_STRS:
        if f"strom.{name}" in options:
            producer[name.replace(".", "_")] = options[f"strom.{name}"]
    if "strom.transactional.id" in options:
        raise ValueError(
            "option strom.transactional.id is set by the connector (one per task); use "
            "deliveryGuarantee=exactly_once and transactionalIdPrefix"
        )
    topic = options.get("topic", "").strip() or None
    security = security_options(raw)
    producer.update(security)
    guarantee = options.get("deliveryguarantee", AT_LEAST_ONCE).strip().lower()
    if guarantee not in (AT_LEAST_ONCE, EXACTLY_ONCE):
        raise ValueError(
            f"option deliveryGuarantee must be {AT_LEAST_ONCE} or {EXACTLY_ONCE}, got "
            f"{options['deliveryguarantee']!r}"
        )
    prefix = options.get("transactionalidprefix")
    timeout = _int(options, "transactionTimeoutMs", 1)
    if guarantee == AT_LEAST_ONCE:
        for name, given in (("transactionalIdPrefix", prefix), ("transactionTimeoutMs", timeout)):
            if given is not None:
                raise ValueError(
                    f"option {name} applies only to deliveryGuarantee={EXACTLY_ONCE} "
                    f"(this write is {AT_LEAST_ONCE})"
                )
        return SinkOptions(
            bootstrap_servers=bootstrap, topic=topic, producer=producer, security=security
        )
    if prefix is None and streaming:
        raise ValueError(
            f"option transactionalIdPrefix is required for a streaming write with "
            f"deliveryGuarantee={EXACTLY_ONCE}: it names the query in Strom across restarts "
            "(keep it stable, one per query; a replayed batch is recognised by it)"
        )
    prefix = DEFAULT_BATCH_PREFIX if prefix is None else prefix.strip()
    if not _PREFIX_CHARS.fullmatch(prefix) or len(prefix) > 128:
        raise ValueError(
            "option transactionalIdPrefix must be 1-128 characters of letters, digits, '.', "
            f"'_' and '-', got {prefix!r}"
        )
    return SinkOptions(
        bootstrap_servers=bootstrap,
        topic=topic,
        producer=producer,
        security=security,
        delivery_guarantee=EXACTLY_ONCE,
        transactional_id_prefix=prefix,
        transaction_timeout_ms=DEFAULT_TRANSACTION_TIMEOUT_MS if timeout is None else timeout,
    )


#: ``schemaRegistryUrl`` when none is given (``strom cluster up``'s registry).
DEFAULT_REGISTRY_URL = "http://127.0.0.1:8081"


@dataclass(frozen=True, slots=True)
class ValueFormatOptions:
    """``valueFormat=avro`` and its options: where the schema comes from."""

    registry_url: str
    subject: str
    #: The reader's schema version (``valueSchemaVersion``: ``latest`` or a number).
    version: str = "latest"
    #: The writer's schema to register and use (``valueSchema``); None: the latest version.
    register: str | None = None
    #: ``user:password`` for a registry with HTTP Basic authentication (``schemaRegistryUserInfo``).
    user_info: str | None = None
    #: The CA certificate of an https registry (``schemaRegistryCaFile``).
    cafile: str | None = None


def parse_value_format(raw: Mapping[str, str], *, sink: bool) -> ValueFormatOptions | None:
    """The value format options of a read (``sink=False``) or a write; None for binary."""
    options = _lower(raw)
    kind = options.get("valueformat", "binary").strip().lower()
    if kind not in ("binary", "avro"):
        raise ValueError(
            f"option valueFormat must be binary or avro, got {options['valueformat']!r}"
        )
    owned = ("schemaregistryurl", "valuesubject", "valueschemaversion", "valueschema",
             "schemaregistryuserinfo", "schemaregistrycafile")  # fmt: skip
    if kind == "binary":
        given = [name for name in owned if name in options]
        if given:
            raise ValueError(f"option {given[0]} applies only to valueFormat=avro")
        return None
    url = options.get("schemaregistryurl", DEFAULT_REGISTRY_URL).strip()
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"option schemaRegistryUrl must be an http(s):// URL, got {url!r}")
    subject = options.get("valuesubject", "").strip()
    if not subject:
        topics = [options["topic"]] if sink and options.get("topic") else [
            t.strip() for t in options.get("subscribe", "").split(",") if t.strip()
        ]  # fmt: skip
        if len(topics) != 1:
            where = "the option topic" if sink else "subscribe with one topic"
            raise ValueError(
                f"option valueSubject is required with valueFormat=avro unless {where}"
            )
        subject = f"{topics[0]}-value"
    version = options.get("valueschemaversion", "latest").strip().lower()
    if version != "latest" and not (version.isdigit() and int(version) >= 1):
        raise ValueError(
            f"option valueSchemaVersion must be latest or a version >= 1, got {version!r}"
        )
    if sink and "valueschemaversion" in options:
        raise ValueError("option valueSchemaVersion applies to reads (a write uses valueSchema)")
    if not sink and "valueschema" in options:
        raise ValueError("option valueSchema applies to writes (a read uses valueSchemaVersion)")
    user_info = options.get("schemaregistryuserinfo")
    if user_info is not None and ":" not in user_info:
        raise ValueError("option schemaRegistryUserInfo must be user:password")
    cafile = options.get("schemaregistrycafile")
    if cafile is not None and not url.startswith("https://"):
        raise ValueError("option schemaRegistryCaFile needs an https:// schemaRegistryUrl")
    return ValueFormatOptions(
        url, subject, version, options.get("valueschema"), user_info=user_info, cafile=cafile
    )

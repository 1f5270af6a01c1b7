"""``strom perf produce|consume|e2e``: load tools as Kafka ships them.

``produce`` is kafka-producer-perf-test (per-record ``send`` with a delivery callback, latency
from ``send`` to acknowledgement), ``consume`` is kafka-consumer-perf-test (records, MB and
rates, fetch and rebalance time) and ``e2e`` is Kafka's EndToEndLatency run at a steady rate
(each record carries its send time; a consumer in a second thread takes send -> received).
Each prints a progress line per reporting interval and a final summary, as text or as JSON
lines (``--json``). Ctrl-C stops the run and still prints the summary of what was measured
(exit 130). Public client API only: ``strom.Producer`` and ``strom.Consumer``. docs/perf.md.
"""

from __future__ import annotations

import argparse
import os
import random
import string
import threading
import time
from collections.abc import Callable
from functools import partial
from operator import attrgetter
from typing import Any

from strom.cli.bootstrap import add_bootstrap_option, default_bootstrap
from strom.cli.perf_stats import (
    MB,
    LatencyHistogram,
    Output,
    Throttler,
    Window,
    stop_on_interrupt,
)
from strom.cli.producer_properties import kafka_names, parse_producer_properties
from strom.consumer import Consumer
from strom.errors import ConfigurationError, StromError
from strom.producer.producer import Producer, RecordMetadata
from strom.types import ConsumerRecord, TopicPartition

EXIT_INTERRUPTED = 130
#: Seconds given to settling (flush, last records) after Ctrl-C.
_INTERRUPT_GRACE_S = 5.0
#: kafka-producer-perf-test's --transaction-duration-ms default.
_DEFAULT_TRANSACTION_MS = 3000
#: Longest a group member waits for its first assignment before ``perf consume`` gives up.
_JOIN_TIMEOUT_S = 60.0
#: e2e values: 8-byte send time (perf_counter_ns, big endian), 8-byte run tag, padding.
_E2E_HEADER = 16

_PRODUCE_PROGRESS = (
    "{records} records sent, {records_per_sec:.1f} records/sec ({mb_per_sec:.2f} MB/sec), "
    "{avg_latency_ms:.1f} ms avg latency, {max_latency_ms:.1f} ms max latency."
)
_PRODUCE_SUMMARY = (
    "{records} records sent, {records_per_sec:.1f} records/sec ({mb_per_sec:.2f} MB/sec), "
    "{avg_latency_ms:.2f} ms avg latency, {max_latency_ms:.2f} ms max latency, "
    "{p50_ms:.2f} ms 50th, {p95_ms:.2f} ms 95th, {p99_ms:.2f} ms 99th, {p999_ms:.2f} ms 99.9th."
)
_CONSUME_PROGRESS = (
    "{records} records consumed, {records_per_sec:.1f} records/sec ({mb_per_sec:.2f} MB/sec)."
)
_CONSUME_SUMMARY = (
    "{records} records consumed ({mb:.2f} MB) in {elapsed_s:.2f} s, "
    "{records_per_sec:.1f} records/sec ({mb_per_sec:.2f} MB/sec); rebalance time "
    "{rebalance_time_ms:.0f} ms, fetch time {fetch_time_ms:.0f} ms "
    "({fetch_records_per_sec:.1f} records/sec, {fetch_mb_per_sec:.2f} MB/sec)."
)
_E2E_PROGRESS = (
    "{records} records received, {records_per_sec:.1f} records/sec, "
    "{avg_latency_ms:.2f} ms avg latency, {max_latency_ms:.2f} ms max latency."
)
_E2E_SUMMARY = (
    "{sent} records sent at {send_rate:.1f} records/sec, {received} received; end-to-end "
    "latency {avg_latency_ms:.2f} ms avg, {p50_ms:.2f} ms 50th, {p95_ms:.2f} ms 95th, "
    "{p99_ms:.2f} ms 99th, {p999_ms:.2f} ms 99.9th, {max_latency_ms:.2f} ms max "
    "(acknowledged: {ack_p50_ms:.2f} ms 50th, {ack_p99_ms:.2f} ms 99th)."
)


# -- arguments ----------------------------------------------------------------------------------


def _escaped(text: str) -> str:
    """A delimiter as typed: ``\\n``, ``\\t`` escapes are understood."""
    value = text.encode().decode("unicode_escape")
    if not value:
        raise argparse.ArgumentTypeError("the delimiter must not be empty")
    return value


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--topic", required=True)
    add_bootstrap_option(parser, resolved=False)
    parser.add_argument(
        "--reporting-interval-ms",
        type=int,
        default=5000,
        help="a progress line this often (default: %(default)s)",
    )
    parser.add_argument("--json", action="store_true", help="JSON lines: progress and summary")


def _producer_properties(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--producer-property",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a Kafka producer property (acks, linger.ms, batch.size, compression.type, "
        "enable.idempotence, max.in.flight.requests.per.connection, ...); repeatable",
    )
    parser.add_argument(
        "--producer-props",
        nargs="+",
        action="extend",
        dest="producer_property",
        metavar="NAME=VALUE",
        help="the same, several at once (kafka-producer-perf-test's spelling)",
    )


def add_parser(commands: Any) -> None:
    perf = commands.add_parser("perf", help="load tools: produce, consume, end-to-end latency")
    tools = perf.add_subparsers(dest="tool", metavar="TOOL", required=True)
    _add_produce(tools)
    _add_consume(tools)
    _add_e2e(tools)


def _add_produce(tools: Any) -> None:
    produce = tools.add_parser("produce", help="producer throughput and latency")
    produce.add_argument("--num-records", type=int, required=True, help="records to send")
    payload = produce.add_mutually_exclusive_group(required=True)
    payload.add_argument("--record-size", type=int, help="bytes per record (random letters)")
    payload.add_argument(
        "--payload-file", help="send records taken at random from this file's payloads"
    )
    produce.add_argument(
        "--payload-delimiter",
        type=_escaped,
        default="\n",
        help="splits --payload-file into payloads (default: newline)",
    )
    produce.add_argument(
        "--throughput",
        type=float,
        default=-1,
        help="at most this many records/s; -1: unthrottled (default: %(default)s)",
    )
    produce.add_argument(
        "--transactional-id",
        help="send in transactions with this transactional id (default: the transactional.id "
        "property; transactions are used when either is set)",
    )
    produce.add_argument(
        "--transaction-duration-ms",
        type=int,
        help="commit each transaction after this long and begin the next (default 3000 when "
        "transactions are used, as kafka-producer-perf-test)",
    )
    _producer_properties(produce)
    _common(produce)
    produce.set_defaults(handler=produce_command)


def _add_consume(tools: Any) -> None:
    consume = tools.add_parser("consume", help="consumer throughput")
    consume.add_argument("--messages", type=int, required=True, help="records to consume")
    consume.add_argument(
        "--group", help="join this consumer group (default: assign every partition)"
    )
    start = consume.add_mutually_exclusive_group()
    start.add_argument(
        "--from-earliest",
        dest="from_latest",
        action="store_false",
        default=False,
        help="start at the beginning (the default)",
    )
    start.add_argument(
        "--from-latest",
        dest="from_latest",
        action="store_true",
        help="start at the end (default: the beginning; with --group, where no offset is "
        "committed)",
    )
    consume.add_argument(
        "--timeout-ms",
        type=int,
        default=10000,
        help="give up when no record came for this long (default: %(default)s)",
    )
    consume.add_argument(
        "--isolation-level",
        choices=["read_uncommitted", "read_committed"],
        default="read_uncommitted",
        help="read_committed: only committed transactions' records (default: %(default)s)",
    )
    _common(consume)
    consume.set_defaults(handler=consume_command)


def _add_e2e(tools: Any) -> None:
    e2e = tools.add_parser("e2e", help="end-to-end latency at a steady rate")
    amount = e2e.add_mutually_exclusive_group(required=True)
    amount.add_argument("--num-records", type=int, help="records to send")
    amount.add_argument("--duration", type=float, metavar="SECONDS", help="send for this long")
    e2e.add_argument(
        "--throughput",
        type=float,
        default=1000,
        help="records/s; -1: unthrottled (default: %(default)s)",
    )
    e2e.add_argument("--acks", choices=["all", "-1", "0", "1"], help="default: all")
    e2e.add_argument(
        "--record-size", type=int, default=100, help="bytes per record, >= 16 (default: 100)"
    )
    e2e.add_argument(
        "--timeout-ms",
        type=int,
        default=30000,
        help="after the last send, wait this long without a new record (default: %(default)s)",
    )
    _producer_properties(e2e)
    _common(e2e)
    e2e.set_defaults(handler=e2e_command)


def _positive(name: str, value: float | None) -> None:
    if value is not None and value <= 0:
        raise ConfigurationError(f"{name} must be > 0, got {value:g}")


def _throughput(value: float) -> float | None:
    """Records/s to pace at, None for unthrottled (-1)."""
    if value == -1:
        return None
    if value <= 0:
        raise ConfigurationError(f"--throughput must be > 0 or -1 (unthrottled), got {value:g}")
    return value


def _producer(bootstrap: str, kwargs: dict[str, Any]) -> Producer:
    """A producer with the properties' arguments; a bad value is reported by property name."""
    try:
        return Producer(bootstrap, **kwargs)
    except ConfigurationError as exc:
        raise ConfigurationError(kafka_names(str(exc))) from None


def _bootstrap(args: argparse.Namespace, kwargs: dict[str, Any]) -> str:
    """--bootstrap-server, else a bootstrap.servers property, else env, else the default."""
    from_property = kwargs.pop("bootstrap_servers", None)
    return str(args.bootstrap_server or from_property or default_bootstrap())


# -- produce ------------------------------------------------------------------------------------


def _payloads(args: argparse.Namespace) -> list[bytes]:
    """--record-size: one payload of random capital letters (as Kafka's tool); else the
    non-empty pieces of --payload-file."""
    if args.payload_file is None:
        _positive("--record-size", args.record_size)
        letters = random.choices(string.ascii_uppercase, k=args.record_size)
        return ["".join(letters).encode()]
    try:
        with open(args.payload_file, "rb") as source:
            data = source.read()
    except OSError as exc:
        raise ConfigurationError(
            f"cannot read payload file {args.payload_file}: {exc.strerror}"
        ) from None
    payloads = [p for p in data.split(args.payload_delimiter.encode()) if p]
    if not payloads:
        raise ConfigurationError(f"payload file {args.payload_file} holds no payload")
    return payloads


class _ProduceMeter:
    """Acknowledgements, counted by the delivery callback on the producer's loop thread (which
    also writes the progress lines, as Kafka's callback does)."""

    def __init__(self, output: Output, interval_s: float) -> None:
        self.output = output
        self.histogram = LatencyHistogram()
        self.bytes = 0
        self.failed = 0
        self.first_error: BaseException | None = None
        self.window = Window(interval_s, self._progress)

    def delivered(
        self, sent: float, size: int, metadata: RecordMetadata | None, error: BaseException | None
    ) -> None:
        now = time.perf_counter()
        if error is not None:
            self.failed += 1
            if self.first_error is None:
                self.first_error = error
            return
        us = int((now - sent) * 1e6)
        self.histogram.record(us)
        self.bytes += size
        window = self.window
        window.add_latency(us)
        window.add(1, size, now)

    def _progress(self, window: Window, elapsed_s: float) -> None:
        self.output.line("progress", _PRODUCE_PROGRESS, window.rates(elapsed_s))


def produce_command(args: argparse.Namespace) -> int:
    _positive("--num-records", args.num_records)
    _positive("--reporting-interval-ms", args.reporting_interval_ms)
    rate = _throughput(args.throughput)
    payloads = _payloads(args)
    kwargs = parse_producer_properties(args.producer_property)
    if args.transactional_id is not None:
        kwargs["transactional_id"] = args.transactional_id
    if args.transaction_duration_ms is not None:
        _positive("--transaction-duration-ms", args.transaction_duration_ms)
        if "transactional_id" not in kwargs:
            raise ConfigurationError(
                "--transaction-duration-ms needs --transactional-id (or transactional.id)"
            )
    producer = _producer(_bootstrap(args, kwargs), kwargs)
    transactions = Transactions.start(producer, args.transaction_duration_ms)
    output = Output(args.json)
    interrupted = False
    try:
        producer.partitions_for(args.topic)  # an unknown topic or no cluster: one clear error
        meter = _ProduceMeter(output, args.reporting_interval_ms / 1000)
        with stop_on_interrupt() as stop:
            start = time.perf_counter()
            sent = _send_all(
                args,
                producer,
                payloads=payloads,
                meter=meter,
                rate=rate,
                stop=stop,
                transactions=transactions,
            )
            interrupted = stop.is_set()
            if interrupted:
                producer.close(_INTERRUPT_GRACE_S)
            elif transactions is not None:
                transactions.commit()
            else:
                producer.flush()
            elapsed = time.perf_counter() - start
    finally:
        producer.close(_INTERRUPT_GRACE_S if interrupted else None)
    count = meter.histogram.count
    summary: dict[str, Any] = {
        "records": count,
        "records_per_sec": count / elapsed,
        "mb_per_sec": meter.bytes / MB / elapsed,
        **meter.histogram.summary(),
        "bytes": meter.bytes,
        "elapsed_s": elapsed,
        "sent": sent,
        "failed": meter.failed,
    }
    if transactions is not None:
        summary["transactions"] = transactions.committed
    output.line("summary", _PRODUCE_SUMMARY, summary)
    if interrupted:
        return EXIT_INTERRUPTED  # records cut short by the interrupt count as failed
    if meter.failed:
        raise StromError(f"{meter.failed} of {sent} records not delivered: {meter.first_error}")
    return 0


def _send_all(
    args: argparse.Namespace,
    producer: Producer,
    *,
    payloads: list[bytes],
    meter: _ProduceMeter,
    rate: float | None,
    stop: threading.Event,
    transactions: Transactions | None = None,
) -> int:
    """Send ``--num-records`` records (fewer on Ctrl-C); returns how many were sent."""
    topic, send, delivered, clock = args.topic, producer.send, meter.delivered, time.perf_counter
    throttler = None if rate is None else Throttler(rate, stop)
    single = payloads[0] if len(payloads) == 1 else None
    choose = random.choice
    for sent in range(args.num_records):
        if stop.is_set():
            return sent
        if transactions is not None:
            transactions.maybe_roll()
        payload = single if single is not None else choose(payloads)
        send(topic, payload, on_delivery=partial(delivered, clock(), len(payload)))
        if throttler is not None:
            throttler.pace(sent + 1)
    return int(args.num_records)


class Transactions:
    """``perf produce`` in transactions: each one is committed once it has lasted
    ``--transaction-duration-ms`` (checked before each send), as Kafka's tool does."""

    def __init__(self, producer: Producer, duration_s: float) -> None:
        self.producer = producer
        self.duration_s = duration_s
        self.committed = 0
        self._started = 0.0

    @classmethod
    def start(cls, producer: Producer, duration_ms: int | None) -> Transactions | None:
        if producer.config.transactional_id is None:
            return None
        transactions = cls(producer, (duration_ms or _DEFAULT_TRANSACTION_MS) / 1000)
        producer.init_transactions()
        transactions._begin()
        return transactions

    def _begin(self) -> None:
        self.producer.begin_transaction()
        self._started = time.perf_counter()

    def maybe_roll(self) -> None:
        if time.perf_counter() - self._started >= self.duration_s:
            self.commit()
            self._begin()

    def commit(self) -> None:
        self.producer.commit_transaction()
        self.committed += 1


# -- consume ------------------------------------------------------------------------------------

_VALUE_SIZE = attrgetter("serialized_value_size")
_KEY_SIZE = attrgetter("serialized_key_size")


def _size(records: list[ConsumerRecord]) -> int:
    """Key and value bytes of ``records`` (null ones count 0, their size being -1)."""
    values = list(map(_VALUE_SIZE, records))
    keys = list(map(_KEY_SIZE, records))
    return sum(values) + values.count(-1) + sum(keys) + keys.count(-1)


class _Assignment:
    """Rebalance listener timing the join: when the group first assigned partitions."""

    def __init__(self) -> None:
        self.at: float | None = None

    def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None:
        if self.at is None:
            self.at = time.perf_counter()

    def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None:
        pass


def consume_command(args: argparse.Namespace) -> int:
    _positive("--messages", args.messages)
    _positive("--timeout-ms", args.timeout_ms)
    _positive("--reporting-interval-ms", args.reporting_interval_ms)
    output = Output(args.json)
    consumer = Consumer(
        bootstrap_servers=_bootstrap(args, {}),
        group_id=args.group,
        auto_offset_reset="latest" if args.from_latest else "earliest",
        enable_auto_commit=args.group is not None,
        isolation_level=args.isolation_level,
    )
    try:
        partitions = consumer.partitions_for_topic(args.topic)  # unknown topic: one clear error
        with stop_on_interrupt() as stop:
            result = _consume(args, consumer, sorted(partitions), output, stop)
    finally:
        consumer.close()
    count, nbytes, elapsed, rebalance, timed_out = result
    fetch = max(elapsed - rebalance, 1e-9)
    summary = {
        "records": count,
        "mb": nbytes / MB,
        "elapsed_s": elapsed,
        "records_per_sec": count / elapsed,
        "mb_per_sec": nbytes / MB / elapsed,
        "rebalance_time_ms": rebalance * 1000,
        "fetch_time_ms": fetch * 1000,
        "fetch_records_per_sec": count / fetch,
        "fetch_mb_per_sec": nbytes / MB / fetch,
        "bytes": nbytes,
    }
    output.line("summary", _CONSUME_SUMMARY, summary)
    if timed_out:
        raise StromError(
            f"no record for {args.timeout_ms} ms: {count} of {args.messages} records consumed"
        )
    return EXIT_INTERRUPTED if stop.is_set() else 0


def _consume(
    args: argparse.Namespace,
    consumer: Consumer,
    partitions: list[int],
    output: Output,
    stop: threading.Event,
) -> tuple[int, int, float, float, bool]:
    """Poll until ``--messages`` records, the idle timeout or Ctrl-C: (records, bytes, seconds
    from start to the last record, rebalance seconds, timed out)."""
    wanted, idle_s = args.messages, args.timeout_ms / 1000

    def progress(window: Window, elapsed_s: float) -> None:
        rates = window.rates(elapsed_s)
        del rates["avg_latency_ms"], rates["max_latency_ms"]
        output.line("progress", _CONSUME_PROGRESS, rates)

    window = Window(args.reporting_interval_ms / 1000, progress)
    start = time.perf_counter()
    assignment = _Assignment()
    if args.group is not None:
        consumer.subscribe([args.topic], listener=assignment)
    else:
        consumer.assign([TopicPartition(args.topic, p) for p in partitions])
        if args.from_latest:
            consumer.seek_to_end()
        else:
            consumer.seek_to_beginning()
        assignment.at = start
    count = nbytes = 0
    last = None
    timed_out = False
    while count < wanted and not stop.is_set():
        batches = consumer.poll(timeout_ms=200, max_records=min(wanted - count, 10_000))
        now = time.perf_counter()
        got = size = 0
        for records in batches.values():
            got += len(records)
            size += _size(records)
        if got:
            count += got
            nbytes += size
            last = now
        window.add(got, size, now)
        if assignment.at is None:
            if now - start > _JOIN_TIMEOUT_S:
                raise StromError(
                    f"group {args.group} assigned no partition within {_JOIN_TIMEOUT_S:.0f} s"
                )
        elif now - max(last or 0.0, assignment.at) >= idle_s:
            timed_out = True
            break
    end = last if last is not None else time.perf_counter()
    joined = assignment.at if assignment.at is not None else end
    return count, nbytes, max(end - start, 1e-9), joined - start, timed_out


# -- e2e ----------------------------------------------------------------------------------------


class _Receiver(threading.Thread):
    """The e2e consumer: polls in its own thread, takes each tagged record's latency when
    ``poll`` returns it and writes the progress lines."""

    def __init__(self, consumer: Consumer, tag: bytes, output: Output, interval_s: float) -> None:
        super().__init__(name="strom-perf-e2e-consumer", daemon=True)
        self.consumer = consumer
        self.tag = tag
        self.output = output
        self.histogram = LatencyHistogram()
        self.window = Window(interval_s, self._progress)
        self.received = 0
        self.error: BaseException | None = None
        self.done = threading.Event()

    def run(self) -> None:
        tag, histogram, window = self.tag, self.histogram, self.window
        try:
            while not self.done.is_set():
                batches = self.consumer.poll(timeout_ms=100)
                now_ns = time.perf_counter_ns()
                now = now_ns / 1e9
                got = size = 0
                for records in batches.values():
                    for record in records:
                        value = record.value
                        if value is None or value[8:_E2E_HEADER] != tag:
                            continue  # another writer's record, or the warm-up
                        us = (now_ns - int.from_bytes(value[:8], "big")) // 1000
                        histogram.record(us)
                        window.add_latency(us)
                        got += 1
                        size += len(value)
                self.received += got
                window.add(got, size, now)
        except BaseException as exc:  # handed to the main thread, which reports it
            self.error = exc

    def _progress(self, window: Window, elapsed_s: float) -> None:
        self.output.line("progress", _E2E_PROGRESS, window.rates(elapsed_s))


def e2e_command(args: argparse.Namespace) -> int:
    _positive("--num-records", args.num_records)
    _positive("--duration", args.duration)
    _positive("--timeout-ms", args.timeout_ms)
    _positive("--reporting-interval-ms", args.reporting_interval_ms)
    if args.record_size < _E2E_HEADER:
        raise ConfigurationError(
            f"--record-size must be >= {_E2E_HEADER} (send time and run tag), "
            f"got {args.record_size}"
        )
    rate = _throughput(args.throughput)
    kwargs = parse_producer_properties(args.producer_property)
    if args.acks is not None:
        kwargs["acks"] = "all" if args.acks in ("all", "-1") else int(args.acks)
    kwargs.setdefault("linger_ms", 0)  # as Kafka's EndToEndLatency: send at once
    if "transactional_id" in kwargs or "transaction_timeout_ms" in kwargs:
        raise ConfigurationError("perf e2e does not run transactions (use perf produce)")
    bootstrap = _bootstrap(args, kwargs)
    output = Output(args.json)
    producer = _producer(bootstrap, kwargs)
    consumer: Consumer | None = None
    try:
        partitions = producer.partitions_for(args.topic)
        for p in partitions:  # connections, producer id, leaders: before anything is timed
            producer.send(args.topic, b"strom perf e2e warm-up", partition=p)
        producer.flush()
        consumer = Consumer(
            bootstrap_servers=bootstrap, auto_offset_reset="latest", enable_auto_commit=False
        )
        tps = [TopicPartition(args.topic, p) for p in partitions]
        consumer.assign(tps)
        consumer.seek_to_end()
        for tp in tps:
            consumer.position(tp)  # the end, resolved before the first record is sent
        return _e2e_run(args, producer, consumer, rate, output)
    finally:
        if consumer is not None:
            consumer.close()
        producer.close(_INTERRUPT_GRACE_S)


def _e2e_run(
    args: argparse.Namespace,
    producer: Producer,
    consumer: Consumer,
    rate: float | None,
    output: Output,
) -> int:
    tag = os.urandom(8)
    padding = b"." * (args.record_size - _E2E_HEADER)
    receiver = _Receiver(consumer, tag, output, args.reporting_interval_ms / 1000)
    acks = LatencyHistogram()
    failures: list[BaseException] = []

    def acknowledged(
        sent_ns: int, metadata: RecordMetadata | None, error: BaseException | None
    ) -> None:
        if error is not None:
            failures.append(error)
        else:
            acks.record((time.perf_counter_ns() - sent_ns) // 1000)

    receiver.start()
    with stop_on_interrupt() as stop:
        try:
            sent, send_s = _paced_sends(
                args,
                producer,
                tag=tag,
                padding=padding,
                acknowledged=acknowledged,
                rate=rate,
                stop=stop,
            )
            if stop.is_set():
                producer.close(_INTERRUPT_GRACE_S)
            else:
                producer.flush()
            expected = sent - len(failures)
            _wait_received(receiver, expected, args.timeout_ms / 1000, stop)
        finally:
            receiver.done.set()
            receiver.join()
    if receiver.error is not None:
        raise receiver.error
    summary: dict[str, Any] = {
        "sent": sent,
        "send_rate": sent / send_s,
        "received": receiver.received,
        **receiver.histogram.summary(),
        "ack_p50_ms": 0.0,
        "ack_p99_ms": 0.0,
        "failed": len(failures),
        "target_rate": rate,
    }
    summary["ack_p50_ms"], summary["ack_p99_ms"] = acks.percentiles((0.5, 0.99))
    output.line("summary", _E2E_SUMMARY, summary)
    if stop.is_set():
        return EXIT_INTERRUPTED
    if failures:
        raise StromError(f"{len(failures)} of {sent} records not delivered: {failures[0]}")
    if receiver.received < expected:
        raise StromError(
            f"{expected - receiver.received} of {expected} acknowledged records not consumed "
            f"within {args.timeout_ms} ms"
        )
    return 0


def _paced_sends(
    args: argparse.Namespace,
    producer: Producer,
    *,
    tag: bytes,
    padding: bytes,
    acknowledged: Callable[[int, RecordMetadata | None, BaseException | None], None],
    rate: float | None,
    stop: threading.Event,
) -> tuple[int, float]:
    """Send until --num-records or --duration (or Ctrl-C): (records sent, seconds). A paced
    --duration run sends throughput x duration records."""
    topic, send, clock = args.topic, producer.send, time.perf_counter_ns
    limit, deadline = args.num_records, None
    if args.duration is not None and rate is not None:
        limit = max(1, round(rate * args.duration))
    elif args.duration is not None:
        deadline = time.perf_counter() + args.duration
    throttler = None if rate is None else Throttler(rate, stop)
    start = time.perf_counter()
    sent = 0
    while (limit is None or sent < limit) and not stop.is_set():
        if deadline is not None and time.perf_counter() >= deadline:
            break
        now = clock()
        value = now.to_bytes(8, "big") + tag + padding
        send(topic, value, on_delivery=partial(acknowledged, now))
        sent += 1
        if throttler is not None:
            throttler.pace(sent)
    return sent, max(time.perf_counter() - start, 1e-9)


def _wait_received(
    receiver: _Receiver, expected: int, idle_s: float, stop: threading.Event
) -> None:
    """Until ``expected`` records arrived, none came for ``idle_s``, the receiver failed or
    Ctrl-C (then at most the grace period)."""
    seen, since = receiver.received, time.perf_counter()
    grace_until = None
    while receiver.received < expected and receiver.is_alive():
        now = time.perf_counter()
        if stop.is_set():
            grace_until = grace_until or now + _INTERRUPT_GRACE_S
            if now >= grace_until:
                return
        if receiver.received != seen:
            seen, since = receiver.received, now
        elif now - since >= idle_s:
            return
        time.sleep(0.02)

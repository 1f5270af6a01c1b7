"""``strom produce`` and ``strom consume``: records from stdin to a topic and back.

``produce`` sends one record per input line (stdin, or ``--file`` with a progress bar on
stderr), optionally ``key<SEP>value`` lines, headers, a partition and a rate limit; it flushes
and exits at end of input. ``consume`` prints records as text, JSON lines or hex until
``--max-messages``, ``--idle-timeout-ms`` or Ctrl-C. Ctrl-C exits with status 130 and no
traceback (what was already sent by ``produce`` is flushed first).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType, TracebackType
from typing import IO, Any

from strom.cli.bootstrap import add_bootstrap_option
from strom.consumer import Consumer
from strom.errors import ConfigurationError, StromError
from strom.producer.producer import Producer
from strom.records.printable import escape_unprintable, json_printable
from strom.types import ConsumerRecord, TopicPartition

#: Seconds between two redraws of the progress bar.
_PROGRESS_EVERY_S = 0.2
#: Seconds given to flushing on Ctrl-C before the producer gives up.
_INTERRUPT_FLUSH_S = 5.0


def _bootstrap(parser: argparse.ArgumentParser) -> None:
    add_bootstrap_option(parser)
    parser.add_argument(
        "--timeout-ms", type=int, default=30000, help="request timeout (default: %(default)s)"
    )


def _header(text: str) -> tuple[str, bytes]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return name, value.encode()


def _separator(text: str) -> str:
    """A separator as typed: ``\\t`` and ``\\n`` escapes are understood."""
    value = text.encode().decode("unicode_escape")
    if not value:
        raise argparse.ArgumentTypeError("the separator must not be empty")
    return value


def add_parsers(commands: Any) -> None:
    produce = commands.add_parser("produce", help="send lines of stdin or a file as records")
    produce.add_argument("topic")
    produce.add_argument("--file", help="read this file instead of stdin (with a progress bar)")
    produce.add_argument(
        "--key-separator",
        type=_separator,
        metavar="SEP",
        help="lines are KEY<SEP>VALUE (\\t allowed); a line without SEP is an error",
    )
    produce.add_argument(
        "--header",
        action="append",
        type=_header,
        default=[],
        metavar="KEY=VALUE",
        help="a header on every record (repeatable)",
    )
    produce.add_argument("--partition", type=int, help="send every record to this partition")
    produce.add_argument("--rate", type=float, metavar="N", help="at most N records per second")
    produce.add_argument("--acks", choices=["all", "1", "0", "-1"], default="all")
    produce.add_argument(
        "--compression",
        choices=["none", "gzip", "snappy", "lz4", "zstd"],
        default="lz4",
        help="default: %(default)s",
    )
    produce.add_argument("--no-progress", action="store_true", help="no progress bar")
    _bootstrap(produce)
    produce.set_defaults(handler=produce_command)

    consume = commands.add_parser("consume", help="print the records of a topic")
    consume.add_argument("topic")
    consume.add_argument("--group", help="consumer group to join (offsets are committed to it)")
    consume.add_argument(
        "--from-beginning", action="store_true", help="start at the earliest offset"
    )
    consume.add_argument(
        "--partition",
        type=int,
        action="append",
        help="read only this partition (repeatable); default: every partition",
    )
    consume.add_argument(
        "--offset",
        help="start offset with --partition: a number, earliest or latest (default: latest, "
        "or earliest with --from-beginning)",
    )
    consume.add_argument("--max-messages", type=int, help="exit after this many records")
    consume.add_argument(
        "--idle-timeout-ms",
        type=int,
        help="exit when no record arrived for this long (with --group: counted from the "
        "group's assignment, again after each rebalance; a join with the group's coordinator "
        "is not idle, a coordinator that cannot be reached is)",
    )
    consume.add_argument(
        "--isolation-level",
        choices=["read_uncommitted", "read_committed"],
        default="read_uncommitted",
        help="read_committed: only committed transactions' records, up to the last stable "
        "offset (default: %(default)s); transaction markers are never printed",
    )
    consume.add_argument("--format", choices=["text", "json", "hex"], default="text")
    consume.add_argument("--print-key", action="store_true")
    consume.add_argument("--print-headers", action="store_true")
    consume.add_argument("--print-timestamp", action="store_true")
    consume.add_argument("--print-offset", action="store_true", help="print partition and offset")
    consume.add_argument(
        "--raw",
        action="store_true",
        help="print keys, values and headers with their control characters as they are (for a "
        "pipe or a file); by default they are escaped (\\x1b, \\n, ...) so that no escape "
        "sequence reaches the terminal",
    )
    _bootstrap(consume)
    consume.set_defaults(handler=consume_command)


class _Interrupts:
    """Ctrl-C for the console loops: a KeyboardInterrupt raised only where it is safe.

    Raised from inside a client call, it could leave a lock shared with the background loop
    thread half-taken and hang the exit; so SIGINT only sets a flag that the loop checks,
    except while the main thread waits in ``interruptible()`` (reading stdin, rate sleeps).
    """

    def __init__(self) -> None:
        self.requested = False
        self._raise_now = False
        self._previous: Any = None

    def __enter__(self) -> _Interrupts:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.requested = True
        if self._raise_now:
            self._raise_now = False
            raise KeyboardInterrupt

    def check(self) -> None:
        if self.requested:
            raise KeyboardInterrupt

    @contextmanager
    def interruptible(self) -> Iterator[None]:
        self.check()
        self._raise_now = True
        try:
            yield
        finally:
            self._raise_now = False


# -- produce ------------------------------------------------------------------------------------


class _Progress:
    """A one-line progress bar on stderr: bytes read of the file, records, rate."""

    def __init__(self, total: int, stream: IO[str]) -> None:
        self._total = max(total, 1)
        self._stream = stream
        self._start = self._drawn = time.monotonic()

    def update(self, done: int, records: int, final: bool = False) -> None:
        now = time.monotonic()
        if not final and now - self._drawn < _PROGRESS_EVERY_S:
            return
        self._drawn = now
        fraction = min(done / self._total, 1.0)
        filled = int(fraction * 30)
        rate = records / max(now - self._start, 1e-6)
        self._stream.write(
            f"\r[{'#' * filled}{'.' * (30 - filled)}] {fraction:6.1%} "
            f"{records} records {rate:,.0f}/s"
        )
        if final:
            self._stream.write("\n")
        self._stream.flush()


def _lines(stream: IO[bytes]) -> Iterator[bytes]:
    for raw in stream:
        if raw.endswith(b"\r\n"):
            yield raw[:-2]
        elif raw.endswith(b"\n"):
            yield raw[:-1]
        else:
            yield raw


def produce_command(args: argparse.Namespace) -> int:
    if args.rate is not None and args.rate <= 0:
        raise ConfigurationError(f"--rate must be > 0, got {args.rate}")
    failures: list[BaseException] = []
    source: IO[bytes]
    if args.file:
        source = open(args.file, "rb")  # noqa: SIM115 - closed in the finally below
        total = os.fstat(source.fileno()).st_size
        progress = None if args.no_progress else _Progress(total, sys.stderr)
    else:
        source, progress = sys.stdin.buffer, None
    producer = Producer(
        bootstrap_servers=args.bootstrap_server,
        acks="all" if args.acks in ("all", "-1") else int(args.acks),
        compression_type=args.compression,
        request_timeout_ms=args.timeout_ms,
    )
    count = done = 0
    interrupted = False
    lines = _lines(source)
    try:
        with _Interrupts() as interrupts:
            count, done = _produce_lines(
                args,
                producer,
                lines,
                interrupts=interrupts,
                progress=progress,
                failures=failures,
            )
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        try:
            producer.close(_INTERRUPT_FLUSH_S if interrupted else None)
        finally:
            if args.file:
                source.close()
    if progress is not None:
        progress.update(done, count, final=True)
    if failures:
        raise StromError(f"{len(failures)} record(s) not delivered: {failures[0]}")
    return 0


def _produce_lines(
    args: argparse.Namespace,
    producer: Producer,
    lines: Iterator[bytes],
    *,
    interrupts: _Interrupts,
    progress: _Progress | None,
    failures: list[BaseException],
) -> tuple[int, int]:
    """Send every line; returns (records, bytes read)."""
    separator = args.key_separator.encode() if args.key_separator else None
    headers = list(args.header) or None
    count = done = number = 0
    start = time.monotonic()

    def delivered(_metadata: Any, error: BaseException | None) -> None:
        if error is not None:
            failures.append(error)

    while not failures:
        with interrupts.interruptible():
            line = next(lines, None)
        if line is None:
            break
        number += 1
        done += len(line) + 1
        key: bytes | None = None
        value = line
        if separator is not None:
            key, sep, value = line.partition(separator)
            if not sep:
                raise ConfigurationError(
                    f"line {number} has no key separator {args.key_separator!r}"
                )
        if args.rate is not None:
            delay = start + count / args.rate - time.monotonic()
            if delay > 0:
                with interrupts.interruptible():
                    time.sleep(delay)  # the rate limit itself
        producer.send(
            args.topic,
            value=value,
            key=key,
            headers=headers,
            partition=args.partition,
            on_delivery=delivered,
        )
        count += 1
        if progress is not None:
            progress.update(done, count)
    return count, done


# -- consume ------------------------------------------------------------------------------------


def _raw(data: bytes | None) -> str:
    return "null" if data is None else data.decode("utf-8", "backslashreplace")


def _text(data: bytes | None) -> str:
    return "null" if data is None else escape_unprintable(_raw(data))


def _hex(data: bytes | None) -> str:
    return "null" if data is None else data.hex()


def _same(text: str) -> str:
    return text


class _Formatter:
    """One record as a line. Unless ``--raw``, no control character is printed: text shows
    them escaped (``strom.records.printable``, as ``dump-log`` does), JSON as ``\\u``."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.format = args.format
        self.key = args.print_key
        self.headers = args.print_headers
        self.timestamp = args.print_timestamp
        self.offset = args.print_offset
        self.raw = args.raw

    def __call__(self, record: ConsumerRecord) -> str:
        if self.format == "json":
            return self._json(record)
        show = _hex if self.format == "hex" else _raw if self.raw else _text
        name = _same if self.raw else escape_unprintable
        fields = []
        if self.timestamp:
            kind = "LogAppendTime" if record.timestamp_type else "CreateTime"
            fields.append(f"{kind}:{record.timestamp}")
        if self.offset:
            fields.append(f"Partition:{record.partition}\tOffset:{record.offset}")
        if self.key:
            fields.append(show(record.key))
        if self.headers:
            shown = ",".join(f"{name(k)}:{show(v)}" for k, v in record.headers)
            fields.append(shown or "NO_HEADERS")
        fields.append(show(record.value))
        return "\t".join(fields)

    def _json(self, record: ConsumerRecord) -> str:
        out: dict[str, Any] = {}
        if self.timestamp:
            out["timestamp"] = record.timestamp
            out["timestamp_type"] = "LogAppendTime" if record.timestamp_type else "CreateTime"
        if self.offset:
            out["partition"] = record.partition
            out["offset"] = record.offset
        if self.key:
            out["key"] = None if record.key is None else _raw(record.key)
        if self.headers:
            out["headers"] = [[k, None if v is None else _raw(v)] for k, v in record.headers]
        out["value"] = None if record.value is None else _raw(record.value)
        dumped = json.dumps(out, ensure_ascii=False)
        return dumped if self.raw else json_printable(dumped)


class _IdleClock:
    """``--idle-timeout-ms``: time since the last record. With ``--group`` it is also the
    rebalance listener: while this member is joining the group with a coordinator (it has a
    member id, and no partitions yet or a rebalance revoked them) the clock stands still, so
    a join (a new group waits group.initial.rebalance.delay.ms, 3 s) is not idle, as Kafka's
    console consumer's ``--timeout-ms`` intends; it runs again from the assignment. Without a
    reachable coordinator there is no join, and the clock runs."""

    def __init__(self, idle_ms: int | None, member_id: Callable[[], str] | None = None) -> None:
        self._idle_s = None if idle_ms is None else idle_ms / 1000
        self._since = time.monotonic()
        self._member_id = member_id
        self._assigned = member_id is None

    def restart(self) -> None:
        """A record arrived, or the group assigned partitions: idle from now."""
        self._since = time.monotonic()

    def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None:
        self._assigned = True
        self.restart()

    def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None:
        self._assigned = False  # rebalancing: held while the join goes on

    def on_partitions_lost(self, partitions: set[TopicPartition]) -> None:
        self._assigned = False

    def _held(self) -> bool:
        """Joining the group with a coordinator: the clock stays at zero."""
        if self._assigned or self._member_id is None or not self._member_id():
            return False
        self.restart()
        return True

    def wait_ms(self, most: int) -> int:
        """How long the next ``poll`` may wait: ``most``, or less when the clock runs out."""
        if self._idle_s is None or self._held():
            return most
        left = self._since + self._idle_s - time.monotonic()
        return max(0, min(most, int(left * 1000)))

    def expired(self) -> bool:
        return (
            self._idle_s is not None
            and not self._held()
            and time.monotonic() - self._since >= self._idle_s
        )


def _start(args: argparse.Namespace) -> tuple[str, int | None]:
    """The reset strategy and the explicit start offset (None: by the strategy)."""
    reset = "earliest" if args.from_beginning else "latest"
    if args.offset is None:
        return reset, None
    if not args.partition:
        raise ConfigurationError("--offset needs --partition")
    if args.offset in ("earliest", "latest"):
        return args.offset, None
    try:
        offset = int(args.offset)
    except ValueError:
        raise ConfigurationError(
            f"--offset must be a number, earliest or latest, got {args.offset!r}"
        ) from None
    if offset < 0:
        raise ConfigurationError(f"--offset must be >= 0, got {offset}")
    return reset, offset


def consume_command(args: argparse.Namespace) -> int:
    if args.max_messages is not None and args.max_messages <= 0:
        raise ConfigurationError(f"--max-messages must be > 0, got {args.max_messages}")
    reset, offset = _start(args)
    consumer = Consumer(
        bootstrap_servers=args.bootstrap_server,
        group_id=args.group,
        auto_offset_reset=reset,
        request_timeout_ms=args.timeout_ms,
        enable_auto_commit=args.group is not None,
        isolation_level=args.isolation_level,
    )
    try:
        with _Interrupts() as interrupts:
            _consume(args, consumer, offset, interrupts)
    except BrokenPipeError:
        # The reader went away (``| head``): end quietly, as Unix filters do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        consumer.close()
    return 0


def _consume(
    args: argparse.Namespace, consumer: Consumer, offset: int | None, interrupts: _Interrupts
) -> None:
    formatter = _Formatter(args)
    out = sys.stdout
    printed = 0
    # A group member's clock stands still while it joins (see _IdleClock).
    grouped = args.group is not None and not args.partition
    idle = _IdleClock(
        args.idle_timeout_ms,
        (lambda: consumer.group_metadata().member_id) if grouped else None,
    )
    if args.partition:
        partitions = consumer.partitions_for_topic(args.topic)
        wanted = [TopicPartition(args.topic, p) for p in dict.fromkeys(args.partition)]
        for tp in wanted:
            if tp.partition not in partitions:
                raise ConfigurationError(
                    f"topic {args.topic} has no partition {tp.partition} (it has {len(partitions)})"
                )
        consumer.assign(wanted)
        if offset is not None:
            for tp in wanted:
                consumer.seek(tp, offset)
    else:
        consumer.partitions_for_topic(args.topic)  # unknown topic: one clear error
        consumer.subscribe([args.topic], listener=idle if grouped else None)
    while args.max_messages is None or printed < args.max_messages:
        interrupts.check()
        left = None if args.max_messages is None else args.max_messages - printed
        batches = consumer.poll(timeout_ms=idle.wait_ms(500), max_records=left)
        if not batches:
            if idle.expired():
                break
            continue
        idle.restart()
        lines = [formatter(r) for records in batches.values() for r in records]
        out.write("\n".join(lines) + "\n")
        out.flush()
        printed += len(lines)

"""The node's partition logs under one or more log directories, and their background upkeep.

Layout: ``<log.dir>/<topic>-<partition>/`` per partition (see ``files.py``). A new partition
goes to the log directory holding the fewest partitions.

Background work is one asyncio task (``run``) driven by the injected clock: every
``check_interval_ms`` it runs, in a worker thread (``asyncio.to_thread``) so that fsyncs and
unlinks never block the event loop, one maintenance pass over every log:

* ``Log.maintenance``: fsync of segments finished by a roll, ``flush.ms``, delayed file
  deletion, producer-id expiration, and every ``checkpoint_interval_ms`` the recovery-point,
  log-start and high-watermark checkpoints;
* ``Log.apply_retention``: ``retention.ms`` / ``retention.bytes`` / log start (every
  ``retention_check_interval_ms``, Kafka's ``log.retention.check.interval.ms``);
* the log cleaner, when one is attached (``cleaner``), for compacted logs.

Tests call ``run_maintenance`` directly instead of starting the task.

Thread-safety: thread-safe. The map of logs is guarded by a lock; each ``Log`` is itself
thread-safe. ``run`` must be awaited on one event loop; ``close`` stops using the logs (await
``stop`` first when the task is running).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from strom.errors import StorageError
from strom_storage.log.config import LogConfig
from strom_storage.log.files import parse_partition_dir_name, partition_dir_name
from strom_storage.log.log import Log

if TYPE_CHECKING:
    from strom_server.runtime.clock import Clock

__all__ = ["LogManager", "TopicPartition"]

#: Threads closing logs at shutdown.
CLOSE_THREADS = 16

_logger = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


class Cleaner(Protocol):
    """What the manager needs from a log cleaner (``strom_storage.cleaner``)."""

    def clean_logs(self, logs: Sequence[Log], now_ms: int) -> int: ...


class LogManager:
    """Partition logs of one storage node (see module docstring).

    Thread-safety: thread-safe; ``run``/``start``/``stop`` belong to one event loop.
    """

    def __init__(
        self,
        log_dirs: Sequence[Path | str],
        *,
        clock: Clock,
        default_config: LogConfig | None = None,
        config_for: Callable[[str], LogConfig | None] | None = None,
        check_interval_ms: int = 1000,
        retention_check_interval_ms: int = 300_000,
        cleaner: Cleaner | None = None,
        recovery_threads: int = 2,
        checkpoint_interval_ms: int = 5000,
    ) -> None:
        if not log_dirs:
            raise StorageError("at least one log directory is needed")
        self.log_dirs = [Path(d) for d in log_dirs]
        self.clock = clock
        self.default_config = default_config if default_config is not None else LogConfig()
        self._config_for = config_for
        self.check_interval_ms = check_interval_ms
        self.retention_check_interval_ms = retention_check_interval_ms
        self.cleaner = cleaner
        self.recovery_threads = max(1, recovery_threads)
        self.checkpoint_interval_ms = checkpoint_interval_ms
        self._last_checkpoint_ms = clock.time_ms()
        self._lock = threading.RLock()
        self._logs: dict[TopicPartition, Log] = {}
        #: partitions per log dir, so that placing a new one costs O(dirs), not O(partitions)
        self._hosted: dict[Path, int] = dict.fromkeys(self.log_dirs, 0)
        self._last_retention_ms = clock.time_ms()
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    # -- loading and lookup -------------------------------------------------------------------

    def startup(self) -> list[TopicPartition]:
        """Open every partition directory found under the log dirs; returns their names.

        Partitions open in parallel on ``recovery_threads`` threads (Kafka's
        ``num.recovery.threads.per.data.dir``): after a clean shutdown opening is cheap, after
        a crash each partition recovers its tail.
        """
        work: list[tuple[TopicPartition, Path]] = []
        seen: set[TopicPartition] = set(self._logs)
        for log_dir in self.log_dirs:
            log_dir.mkdir(parents=True, exist_ok=True)
            for name in sorted(os.listdir(log_dir)):
                parsed = parse_partition_dir_name(name)
                if parsed is None or not (log_dir / name).is_dir():
                    continue
                if parsed in seen:
                    raise StorageError(f"partition {name} is in two log directories")
                seen.add(parsed)
                work.append((parsed, log_dir / name))

        def open_one(item: tuple[TopicPartition, Path]) -> tuple[TopicPartition, Log | Exception]:
            tp, path = item
            try:
                return tp, Log.open(path, self._config(tp[0]), clock=self.clock)
            except Exception as exc:  # report every failed partition, keep the others
                return tp, exc

        with ThreadPoolExecutor(max_workers=self.recovery_threads) as pool:
            results = list(pool.map(open_one, work))
        failed = [(tp, r) for tp, r in results if isinstance(r, Exception)]
        with self._lock:
            for tp, result in results:
                if isinstance(result, Log):
                    self._add(tp, result)
        if failed:
            names = ", ".join(f"{t}-{p}: {exc}" for (t, p), exc in failed)
            raise StorageError(f"{len(failed)} partitions failed to open: {names}")
        return [tp for tp, _ in results]

    def _config(self, topic: str) -> LogConfig:
        if self._config_for is not None:
            config = self._config_for(topic)
            if config is not None:
                return config
        return self.default_config

    def get_log(self, topic: str, partition: int) -> Log | None:
        """The log of a partition this node hosts, or None."""
        return self._logs.get((topic, partition))

    def get_or_create_log(self, topic: str, partition: int, config: LogConfig | None = None) -> Log:
        """The partition's log, creating its directory in the least-used log dir if needed."""
        with self._lock:
            if self._closed:
                raise StorageError("the log manager is closed")
            log = self._logs.get((topic, partition))
            if log is not None:
                if config is not None and config != log.config:
                    log.update_config(config)
                return log
            log_dir = min(self.log_dirs, key=self._hosted.__getitem__)
            log = Log.open(
                log_dir / partition_dir_name(topic, partition),
                config if config is not None else self._config(topic),
                clock=self.clock,
            )
            self._add((topic, partition), log)
            return log

    def _add(self, tp: TopicPartition, log: Log) -> None:
        self._logs[tp] = log
        parent = log.directory.parent
        self._hosted[parent] = self._hosted.get(parent, 0) + 1

    def delete_log(self, topic: str, partition: int) -> bool:
        """Remove the partition and its files; False when it is not hosted here."""
        with self._lock:
            log = self._logs.pop((topic, partition), None)
            if log is not None:
                self._hosted[log.directory.parent] -= 1
        if log is None:
            return False
        with contextlib.suppress(OSError):
            log.close_unclean()
        shutil.rmtree(log.directory, ignore_errors=True)
        return True

    def logs(self) -> dict[TopicPartition, Log]:
        """A snapshot of the hosted logs."""
        with self._lock:
            return dict(self._logs)

    # -- background upkeep --------------------------------------------------------------------

    def run_maintenance(self, now_ms: int | None = None) -> None:
        """One pass of upkeep over every log (see module docstring); synchronous."""
        now = self.clock.time_ms() if now_ms is None else now_ms
        logs = list(self.logs().values())
        retention_due = now - self._last_retention_ms >= self.retention_check_interval_ms
        checkpoint_due = now - self._last_checkpoint_ms >= self.checkpoint_interval_ms
        for log in logs:
            if log.closed:
                continue
            try:
                if retention_due:
                    log.apply_retention(now)
                log.maintenance(now, write_checkpoints=checkpoint_due)
            except Exception:  # one failing log must not stop the upkeep of the others
                if not log.closed:
                    _logger.exception("upkeep of %s failed", log.directory)
        if retention_due:
            self._last_retention_ms = now
        if checkpoint_due:
            self._last_checkpoint_ms = now
        if self.cleaner is not None:
            try:
                self.cleaner.clean_logs([log for log in logs if log.config.compact], now)
            except Exception:
                _logger.exception("log cleaner pass failed")

    async def run(self) -> None:
        """Run ``run_maintenance`` every ``check_interval_ms`` until cancelled."""
        while True:
            await self.clock.sleep(self.check_interval_ms / 1000)
            try:
                await asyncio.to_thread(self.run_maintenance)
            except Exception:  # keep the loop alive; the next pass retries
                _logger.exception("log upkeep pass failed")

    def start(self) -> asyncio.Task[None]:
        """Start ``run`` as a task on the running event loop."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self.run(), name="log-manager")
        return self._task

    async def stop(self) -> None:
        """Cancel the background task and wait for it."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def close(self) -> None:
        """Close every log cleanly (flush, checkpoints, clean-shutdown markers)."""
        with self._lock:
            self._closed = True
            logs = list(self._logs.values())
        errors: list[Exception] = []

        def close_one(log: Log) -> None:
            try:
                log.close()
            except Exception as exc:  # close the others, then report
                errors.append(exc)

        # Each close fsyncs a few files; in parallel, a node with thousands of partitions
        # still stops within its shutdown grace (fsync releases the GIL).
        with ThreadPoolExecutor(max_workers=CLOSE_THREADS, thread_name_prefix="close") as pool:
            list(pool.map(close_one, logs))
        if errors:
            raise StorageError(f"{len(errors)} logs failed to close: {errors[0]}")

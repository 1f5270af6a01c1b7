"""Bounded server-side search over a topic's records: substring or filter expression.

A search is a job on the console's event loop: it reads the chosen partitions from where the
user said up to the end offsets of when it started, counts every record it scans, keeps the
first ``max_results`` matches (already cut for display), and ends at the end of the data, at
``max_records`` scanned, after ``max_seconds``, or when stopped. At most ``max_jobs`` jobs
are kept; starting one more drops the oldest finished one (or refuses when all run).
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from strom.aio import Consumer
from strom.errors import StromError
from strom.types import TopicPartition
from strom_console.browse import consumer_options
from strom_console.filters import Matcher, RecordView
from strom_console.messages import ShownRecord, show_record
from strom_server.runtime.logs import get_logger

__all__ = ["SearchJob", "SearchJobs", "TooManySearchesError"]

log = get_logger(__name__)


class TooManySearchesError(RuntimeError):
    """Every search slot is taken by a running search."""


@dataclass
class SearchJob:
    id: str
    topic: str
    query: str
    mode: str  # "text" | "filter"
    positions: dict[int, int]
    ends: dict[int, int]
    max_records: int
    max_results: int
    max_seconds: float
    display_bytes: int
    started: float = field(default_factory=time.time)
    scanned: int = 0
    matches: list[ShownRecord] = field(default_factory=list)
    state: str = "running"  # running | done | stopped | limit | timeout | failed
    error: str = ""
    stop_requested: bool = False
    task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self.state == "running"

    @property
    def elapsed_s(self) -> float:
        return time.time() - self.started

    @property
    def total(self) -> int:
        """Records between the start positions and the end offsets (an upper bound)."""
        return sum(max(self.ends[p] - o, 0) for p, o in self.positions.items())


async def _scan(
    job: SearchJob, matcher: Matcher, connection: Mapping[str, Any], request_timeout_ms: int
) -> None:
    open_ = {p for p, o in job.positions.items() if o < job.ends[p]}
    if not open_:
        job.state = "done"
        return
    consumer = Consumer(**connection, **consumer_options(request_timeout_ms))  # type: ignore[arg-type]
    try:
        tps = {p: TopicPartition(job.topic, p) for p in open_}
        consumer.assign(tps.values())
        for p, tp in tps.items():
            consumer.seek(tp, job.positions[p])
        deadline = time.monotonic() + job.max_seconds
        while open_:
            if job.stop_requested:
                job.state = "stopped"
                return
            if job.scanned >= job.max_records:
                job.state = "limit"
                return
            if time.monotonic() > deadline:
                job.state = "timeout"
                return
            batches = await consumer.poll(timeout_ms=200, max_records=500)
            for tp, records in batches.items():
                end = job.ends[tp.partition]
                for r in records:
                    if r.offset >= end:
                        break
                    if job.scanned >= job.max_records:
                        job.state = "limit"  # records below the end are left unscanned
                        return
                    job.scanned += 1
                    view = RecordView(r.partition, r.offset, r.timestamp, r.key, r.value, r.headers)
                    if len(job.matches) < job.max_results and matcher(view):
                        job.matches.append(
                            show_record(
                                partition=r.partition,
                                offset=r.offset,
                                timestamp=r.timestamp,
                                key=r.key,
                                value=r.value,
                                headers=r.headers,
                                fmt="text",
                                limit=job.display_bytes,
                            )
                        )
                if len(job.matches) >= job.max_results:
                    job.state = "done"
                    return
            for p in list(open_):
                if await consumer.position(tps[p]) >= job.ends[p]:
                    open_.discard(p)
                    consumer.pause(tps[p])
        job.state = "done"
    finally:
        await consumer.close()


class SearchJobs:
    """The console's searches, by id."""

    def __init__(
        self, connection: Mapping[str, Any], request_timeout_ms: int, max_jobs: int = 8
    ) -> None:
        self.connection = connection  # bootstrap_servers and the security options
        self.request_timeout_ms = request_timeout_ms
        self.max_jobs = max_jobs
        self._jobs: dict[str, SearchJob] = {}

    def start(
        self,
        *,
        topic: str,
        query: str,
        mode: str,
        matcher: Matcher,
        positions: Mapping[int, int],
        ends: Mapping[int, int],
        max_records: int,
        max_results: int,
        max_seconds: float,
        display_bytes: int,
    ) -> SearchJob:
        if len(self._jobs) >= self.max_jobs:
            finished = [j for j in self._jobs.values() if not j.running]
            if not finished:
                raise TooManySearchesError(
                    f"{self.max_jobs} searches are running; stop one or wait for one to end"
                )
            del self._jobs[min(finished, key=lambda j: j.started).id]
        job = SearchJob(
            id=secrets.token_urlsafe(12),
            topic=topic,
            query=query,
            mode=mode,
            positions=dict(positions),
            ends=dict(ends),
            max_records=max_records,
            max_results=max_results,
            max_seconds=max_seconds,
            display_bytes=display_bytes,
        )
        self._jobs[job.id] = job
        job.task = asyncio.get_running_loop().create_task(self._run(job, matcher))
        return job

    async def _run(self, job: SearchJob, matcher: Matcher) -> None:
        try:
            await _scan(job, matcher, self.connection, self.request_timeout_ms)
        except asyncio.CancelledError:
            job.state = "stopped"
            raise
        except (StromError, ValueError, OSError) as exc:
            job.state = "failed"
            job.error = str(exc)
            log.warning("search failed", topic=job.topic, error=str(exc))
        log.info("search ended", topic=job.topic, state=job.state, scanned=job.scanned)

    def get(self, job_id: str) -> SearchJob | None:
        return self._jobs.get(job_id)

    def stop(self, job_id: str) -> SearchJob | None:
        job = self._jobs.get(job_id)
        if job is not None and job.running:
            job.stop_requested = True
        return job

    async def close(self) -> None:
        tasks = [j.task for j in self._jobs.values() if j.task is not None and not j.task.done()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

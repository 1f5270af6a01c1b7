"""Benchmark of the web console: page latency over HTTP with many topics and groups, and the
console's memory while browsing a large topic; beside baselines measured in the same run.

One real local cluster on loopback (``LocalClusterSpec``: etcd, 2 controllers, 3 storage
nodes, the gateway, a coordinator) and one console process (``python -m strom_console``,
sampling every 5 s), data in a temporary directory, everything stopped at the end.

* Setup: 1,000 topics x 10 partitions (``--quick``: 50 x 10), 2,000 consumer groups
  (``--groups``; ``--quick``: 200) with committed offsets on 10 partitions each, and one large
  topic of 3 partitions, replication factor 1, holding 10 GiB (``--big-gib``; ``--quick``:
  128 MiB) of 64 KiB values written with ``Producer.send_many``.
* Latency: sequential GETs on one kept-alive HTTP connection (the way a browser tab asks) of
  the overview (``/``), the topics list (``/topics``, first page of 100 rows over all
  topics), the groups list (``/groups``, first page of 100 over all groups, and the last
  page) and a group page (``/groups/bench-group-0``), 200 each (``--quick``: 50) after 5
  warm-up requests; p50 and p99. Baselines: ``/healthz`` (the HTTP floor: uvicorn, the guard,
  routing) and the cluster calls a page would make if it asked the cluster per request, made
  directly by a ``strom.aio.Admin`` in this process (the cluster's floor; the overview, the
  topics list and the groups list serve the sampler's snapshot instead, so they come out far
  below it). Ratio: page p50 / (healthz p50 + calls p50).
* Memory: the console's RSS (``/proc/PID/status`` VmRSS) while browsing the whole large topic
  from its first record to its last, following each page's "next page" positions: pages of
  500 records per partition (``--quick``: 50), as text (each value cut at 4 KiB for display).
  RSS before, after 10 %, 50 % and 100 % of the topic; ratios last / first and last / 10 %
  (flat: close to 1; the first pages raise RSS to the high-water mark of one page).

The last line is ``SUMMARY {json}``.

    .venv/bin/python bench/console.py            # full run, several minutes (topic creation)
    .venv/bin/python bench/console.py --quick    # under a minute
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

from benchkit import bench_arguments, free_base_port, free_port, print_summary, progress

from strom import NewTopic, Producer, TopicPartition
from strom.aio import Admin
from strom_server.local.cluster import LocalClusterSpec
from strom_server.local.supervisor import Supervisor

NODES = 3
BIG_TOPIC = "bench-big"
VALUE_BYTES = 64 * 1024
PAGE_SIZE = 50


@contextlib.contextmanager
def running_cluster(workdir: Path) -> Iterator[LocalClusterSpec]:
    spec = LocalClusterSpec(
        data_dir=workdir,
        etcd_client_port=free_port(),
        etcd_peer_port=free_port(),
        base_port=free_base_port(1 + NODES + 2 + 1),
        storage_nodes=NODES,
        controllers=2,
        coordinators=1,
    )
    supervisor = Supervisor(spec.processes(), grace_s=30.0)
    try:
        supervisor.start_all(90.0)
        yield spec
    finally:
        supervisor.stop_all()


async def _create_led(admin: Admin, names: list[str], partitions: int) -> None:
    """Create ``names`` and wait until every partition has a leader."""
    await admin.create_topics([NewTopic(n, partitions, 1) for n in names])
    deadline = time.monotonic() + 300
    while True:
        described = await admin.describe_topics(names)
        if all(p.leader >= 0 for t in described for p in t.partitions):
            return
        if time.monotonic() > deadline:
            raise RuntimeError("the benchmark topics got no leaders in time")
        await asyncio.sleep(0.5)


async def commit_groups(admin: Admin, names: list[str], groups: int) -> None:
    """``groups`` groups, each with offset 0 committed on the 10 partitions of one topic."""
    limit = asyncio.Semaphore(32)

    async def one(g: int) -> None:
        async with limit:
            await admin.alter_consumer_group_offsets(
                f"bench-group-{g}",
                {TopicPartition(names[g % min(100, len(names))], p): 0 for p in range(10)},
            )

    await asyncio.gather(*(one(g) for g in range(groups)))


async def populate(gateway: str, topics: int, groups: int) -> None:
    """The big topic, the first 100 topics and the groups' commits first (the coordinator
    takes ``__consumer_offsets`` over while the cluster is small), then the other topics,
    100 at a time, each batch led before the next."""
    names = [f"bench-topic-{i:04d}" for i in range(topics)]
    async with Admin(gateway, request_timeout_ms=120_000) as admin:
        await _create_led(admin, [BIG_TOPIC], 3)
        await _create_led(admin, names[:100], 10)
        await commit_groups(admin, names, groups)
        progress(f"  {groups} groups committed offsets")
        for start in range(100, topics, 100):
            await _create_led(admin, names[start : start + 100], 10)
            progress(f"  {start + 100} topics")


def fill_big_topic(gateway: str, total_bytes: int) -> dict[int, int]:
    """``total_bytes`` of values over the big topic's 3 partitions; records per partition."""
    value = os.urandom(VALUE_BYTES // 2).hex().encode()
    per_partition = total_bytes // VALUE_BYTES // 3
    chunk = 256  # records per send_many: 16 MiB
    with Producer(gateway, linger_ms=5, batch_size=1024 * 1024, acks=1) as producer:
        pending = []
        for start in range(0, per_partition, chunk):
            n = min(chunk, per_partition - start)
            for p in range(3):
                pending.append(producer.send_many(BIG_TOPIC, [value] * n, partition=p))
            if len(pending) >= 24:
                for future in pending:
                    future.result(300)
                pending.clear()
            if start and start % (chunk * 40) == 0:
                progress(f"  {3 * start * VALUE_BYTES >> 20} MiB written")
        for future in pending:
            future.result(300)
        producer.flush()
    return dict.fromkeys(range(3), per_partition)


def start_console(gateway: str, workdir: Path) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    log = (workdir / "console.log").open("wb")
    popen = subprocess.Popen(
        [sys.executable, "-m", "strom_console", "--listen", f"127.0.0.1:{port}",
         "--bootstrap-servers", gateway, "--sample-interval-s", "5", "--log-level", "debug"],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    return popen, port


_COOKIES: dict[int, str] = {}  # the console's session cookie, by port: one browser tab


def get(conn: http.client.HTTPConnection, path: str) -> tuple[int, bytes]:
    """GET ``path`` with the session cookie the console gave (as a browser tab would)."""
    cookie = _COOKIES.get(conn.port)
    conn.request("GET", path, headers={"Cookie": cookie} if cookie else {})
    response = conn.getresponse()
    given = response.getheader("set-cookie")
    if given:
        _COOKIES[conn.port] = given.split(";", 1)[0]
    return response.status, response.read()


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not happen in {timeout_s} s")
        time.sleep(0.2)


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return statistics.median(ordered) * 1000, p99 * 1000


def page_latency(port: int, path: str, n: int) -> tuple[float, float, int]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    size = 0
    for _ in range(5):
        status, body = get(conn, path)
        if status != 200:
            raise RuntimeError(f"{path}: HTTP {status}: {body[:300]!r}")
        size = len(body)
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        status, _ = get(conn, path)
        samples.append(time.perf_counter() - t0)
        assert status == 200, path
    conn.close()
    p50, p99 = percentiles(samples)
    return p50, p99, size


async def call_latency(
    gateway: str, calls: Callable[[Admin], Awaitable[Any]], n: int
) -> tuple[float, float]:
    async with Admin(gateway) as admin:
        for _ in range(3):
            await calls(admin)
        samples = []
        for _ in range(n):
            t0 = time.perf_counter()
            await calls(admin)
            samples.append(time.perf_counter() - t0)
    return percentiles(samples)


async def overview_calls(admin: Admin) -> None:
    await admin.describe_cluster()
    await admin.describe_topics()
    await admin.list_consumer_groups()


async def topics_calls(admin: Admin) -> None:
    await admin.describe_topics()


async def groups_calls(admin: Admin) -> None:
    await admin.list_consumer_groups()


async def group_calls(admin: Admin) -> None:
    group = "bench-group-0"
    await admin.describe_consumer_groups([group])
    committed = await admin.list_consumer_group_offsets(group)
    await admin.list_offsets(dict.fromkeys(committed, "latest"))


def sample_seconds(workdir: Path) -> float | None:
    """How long the console's last sample took (its log), None when not logged."""
    found = None
    for line in (workdir / "console.log").read_text(errors="replace").splitlines():
        with contextlib.suppress(ValueError):
            entry = json.loads(line)
            if isinstance(entry, dict) and entry.get("event") == "sample taken":
                found = float(entry["seconds"])
    return found


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def browse_all(popen: subprocess.Popen[bytes], port: int, page_size: int) -> dict[str, Any]:
    """Browse the big topic from its start to its end, page after page (the "next page"
    link's positions), sampling the console's RSS after every page."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    rss = [rss_mb(popen.pid)]
    records: list[int] = [0]
    path = (
        f"/topics/{BIG_TOPIC}/messages?partition=all&start=earliest"
        f"&page_size={page_size}&format=text"
    )
    following = ""
    t0 = time.perf_counter()
    while True:
        status, body = get(conn, path + (f"&from={following}" if following else ""))
        if status != 200:
            raise RuntimeError(f"browsing: HTTP {status}: {body[:300]!r}")
        records.append(records[-1] + body.count(b'class="record"'))
        rss.append(rss_mb(popen.pid))
        found = re.search(rb"from=([0-9:,]+)\"", body)
        following = found.group(1).decode() if found else ""
        if not following:
            break
    conn.close()
    return {"rss": rss, "records": records, "seconds": time.perf_counter() - t0}


def rss_at(rss: list[float], records: list[int], fraction: float) -> float:
    """RSS after the first page at which ``fraction`` of the records were browsed."""
    total = records[-1]
    for r, count in zip(rss, records, strict=True):
        if count >= fraction * total:
            return r
    return rss[-1]


def run(
    quick: bool,
    keep: bool,
    topics_wanted: int | None = None,
    groups_wanted: int | None = None,
    big_gib: float | None = None,
) -> dict[str, Any]:
    topics, groups = (50, 200) if quick else (1000, 2000)
    topics = topics_wanted or topics
    groups = groups_wanted or groups
    big_bytes = int((big_gib or (0.125 if quick else 10.0)) * 2**30)
    requests, page_size = (50, 50) if quick else (200, 500)
    workdir = Path(tempfile.mkdtemp(prefix="strom-bench-console-"))
    summary: dict[str, Any] = {"quick": quick, "topics": topics, "partitions": topics * 10,
                               "groups": groups}  # fmt: skip
    try:
        with running_cluster(workdir) as spec:
            progress(f"cluster up; creating {topics} topics x 10 partitions, {groups} groups")
            asyncio.run(populate(spec.gateway_address, topics, groups))
            progress(f"writing {big_bytes >> 20} MiB of {VALUE_BYTES >> 10} KiB values")
            t0 = time.perf_counter()
            records = fill_big_topic(spec.gateway_address, big_bytes)
            fill_s = time.perf_counter() - t0
            progress(f"  written in {fill_s:.0f} s ({big_bytes / fill_s / 2**20:.0f} MiB/s)")
            summary["big_topic_mib"] = big_bytes >> 20
            popen, port = start_console(spec.gateway_address, workdir)
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

                def sampled() -> bool:
                    with contextlib.suppress(OSError, http.client.HTTPException):
                        status, body = get(conn, "/fragments/groups/bench-group-0")
                        return status == 200 and b"sample(s) from" in body
                    conn.close()
                    return False

                wait_for(sampled, 120, "the console's first sample")
                progress("console up and sampled; measuring page latency")
                http_p50, http_p99, _ = page_latency(port, "/healthz", requests)
                summary.update(healthz_p50_ms=round(http_p50, 2), healthz_p99_ms=round(http_p99, 2))
                for name, path, calls in (
                    ("overview", "/", overview_calls),
                    ("topics", "/topics", topics_calls),
                    ("groups", "/groups", groups_calls),
                    ("groups_last", f"/groups?page={(groups + 99) // 100}", groups_calls),
                    ("group", "/groups/bench-group-0", group_calls),
                ):
                    p50, p99, size = page_latency(port, path, requests)
                    c50, c99 = asyncio.run(call_latency(spec.gateway_address, calls, requests))
                    ratio = p50 / (http_p50 + c50)
                    progress(
                        f"  {name:<8} p50 {p50:6.1f} ms  p99 {p99:6.1f} ms  ({size >> 10} KiB)"
                        f"  | floor: http {http_p50:.1f} + calls {c50:.1f} ms (p99 {c99:.1f})"
                        f"  -> x{ratio:.2f}"
                    )
                    summary.update(
                        {f"{name}_p50_ms": round(p50, 2), f"{name}_p99_ms": round(p99, 2),
                         f"{name}_calls_p50_ms": round(c50, 2),
                         f"{name}_vs_floor": round(ratio, 2)}
                    )  # fmt: skip
                conn.close()
                summary["sample_s"] = sample_seconds(workdir)
                total = sum(records.values())
                progress(f"browsing all of {BIG_TOPIC} ({total} records), {page_size} a page")
                browsed = browse_all(popen, port, page_size)
                rss, counts = browsed["rss"], browsed["records"]
                if counts[-1] != total:
                    raise RuntimeError(f"browsed {counts[-1]} records of {total}")
                at = {f: rss_at(rss, counts, f) for f in (0.1, 0.5, 1.0)}
                summary.update(
                    rss_before_mib=round(rss[0], 1), rss_10pct_mib=round(at[0.1], 1),
                    rss_50pct_mib=round(at[0.5], 1), rss_100pct_mib=round(at[1.0], 1),
                    rss_max_mib=round(max(rss), 1),
                    rss_last_vs_first=round(at[1.0] / rss[0], 2),
                    rss_last_vs_10pct=round(at[1.0] / at[0.1], 2),
                    browsed_mib=round(total * VALUE_BYTES / 2**20), browse_pages=len(rss) - 1,
                    browse_s=round(browsed["seconds"], 1),
                )  # fmt: skip
                progress(
                    f"  RSS {rss[0]:.0f} MiB before, {at[0.1]:.0f} at 10 %, {at[0.5]:.0f} at 50 %,"
                    f" {at[1.0]:.0f} at 100 % (max {max(rss):.0f}; x{at[1.0] / rss[0]:.2f}) over"
                    f" {len(rss) - 1} pages, {browsed['seconds']:.0f} s"
                )
            finally:
                popen.terminate()
                popen.wait(30)
    finally:
        if keep:
            progress(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    p99s = [summary[f"{n}_p99_ms"] for n in ("overview", "topics", "groups", "group")]
    summary["goal_p99_under_300_ms"] = max(p99s) < 300
    return summary


def main() -> None:
    parser = bench_arguments(__doc__ or "", "50 topics, 10 groups, a 32 MiB topic")
    parser.add_argument("--topics", type=int, help="topics of 10 partitions (default 1000)")
    parser.add_argument("--groups", type=int, help="consumer groups (default 2000)")
    parser.add_argument("--big-gib", type=float, help="size of the browsed topic (default 10)")
    args = parser.parse_args()
    if args.topics is not None and not 1 <= args.topics <= 10000:
        parser.error("--topics must be between 1 and 10000")
    if args.groups is not None and not 1 <= args.groups <= 100000:
        parser.error("--groups must be between 1 and 100000")
    if args.big_gib is not None and not 0.01 <= args.big_gib <= 50:
        parser.error("--big-gib must be between 0.01 and 50")
    print_summary(lambda: run(args.quick, args.keep, args.topics, args.groups, args.big_gib))


if __name__ == "__main__":
    main()

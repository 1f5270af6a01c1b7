"""The console's web app: thin handlers over the client library and the plain modules.

``build_app(config)`` returns the ASGI app (Starlette behind ``guard.Guard``); its lifespan
opens the ``strom.aio.Admin`` and the sampler and closes them. Pages are server-rendered
Jinja2 templates with autoescaping on; ``/fragments/...`` answer the parts that
``static/console.js`` refreshes in place.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

import jinja2
from starlette.applications import Starlette
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from strom import errors
from strom.aio import Admin, Producer
from strom.errors import ConfigurationError, StromError
from strom.group import offsets_plan
from strom.serde import SchemaRegistryClient, SchemaRegistryError
from strom.types import ConsumerRecord, NewTopic, TopicPartition
from strom_console import browse, filters, messages, overview, topics
from strom_console.charts import line_chart
from strom_console.config import ConsoleConfig
from strom_console.guard import Guard, session_of
from strom_console.sampler import Sampler, Snapshot
from strom_console.search import SearchJobs, TooManySearchesError
from strom_console.security import Sessions, password_ok
from strom_server.runtime.logs import get_logger

__all__ = ["Console", "build_app"]

log = get_logger(__name__)
_HERE = Path(__file__).parent
_PER_PAGE = 100
_BROWSE_TIMEOUT_S = 5.0


class BadInput(ValueError):
    """A form or query parameter is wrong; shown to the user with status 400."""


class Console:
    """What the handlers share: the config, the cluster clients, the sampler, the searches."""

    def __init__(
        self, config: ConsoleConfig, password: str | None, security: dict[str, Any] | None = None
    ) -> None:
        self.config = config
        self.password = password
        #: Where and how every client of the console connects: the gateway, security options.
        self.connection: dict[str, Any] = {
            "bootstrap_servers": config.bootstrap_servers,
            **(security or {}),
        }
        self.admin = Admin(
            **self.connection,
            request_timeout_ms=config.request_timeout_ms,
            client_id="strom-console",
        )
        self.sampler = Sampler(
            lambda: Admin(
                **self.connection,
                request_timeout_ms=config.request_timeout_ms,
                client_id="strom-console-sampler",
            ),
            interval_s=config.sample_interval_s,
            window_s=config.lag_window_s,
            max_groups=config.lag_groups_max,
            groups_per_sample=config.lag_groups_per_sample,
        )
        self.searches = SearchJobs(self.connection, config.request_timeout_ms)
        #: When the console last changed the cluster: pages wait for a sample taken after it.
        self._changed_at = 0.0
        self.sessions = Sessions()
        self.registry = (
            _registry_client(config.schema_registry_url, config.request_timeout_ms, security)
            if config.schema_registry_url
            else None
        )
        self._producer: Producer | None = None
        self.env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(_HERE / "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
        )
        self.env.filters["rate"] = _rate
        self.env.filters["count"] = _count
        self.env.filters["size"] = _size
        self.env.filters["byterate"] = _byte_rate
        self.env.filters["percent"] = _percent

    async def current(self) -> Snapshot:
        """The sampler's latest snapshot; a new sample is awaited (at most the request
        timeout) before the first one, after a change made through the console, and when the
        latest is older than ``--metadata-cache-s``."""
        snap = self.sampler.snapshot
        age = time.time() - snap.taken
        if snap.taken <= self._changed_at or age > self.config.metadata_cache_s:
            snap = await self.sampler.next_sample(self.config.request_timeout_ms / 1000)
        if not snap.taken:
            problem = self.sampler.last_error or "no answer yet"
            raise StromError(f"the console has no sample of the cluster yet: {problem}")
        return snap

    def changed(self) -> None:
        """The console changed the cluster: the next pages wait for a sample taken after
        it, which starts now."""
        self._changed_at = time.time()
        self.sampler.wake()

    async def producer(self) -> Producer:
        if self._producer is None:
            self._producer = Producer(
                **self.connection,
                client_id="strom-console",
                request_timeout_ms=self.config.request_timeout_ms,
                linger_ms=0,
            )
        return self._producer

    async def close(self) -> None:
        await self.searches.close()
        await self.sampler.close()
        if self._producer is not None:
            await self._producer.close()
        await self.admin.close()
        if self.registry is not None:
            self.registry.close()

    def render(self, request: Request, name: str, status: int = 200, **context: Any) -> Response:
        session = session_of(request.scope)
        page = self.env.get_template(name).render(
            csrf=self.sessions.csrf_token(session),
            read_only=self.config.read_only,
            schemas=self.registry is not None,
            user=session.user,
            login=self.password is not None,
            path=request.url.path,
            query=request.url.query,
            **context,
        )
        return HTMLResponse(page, status_code=status)


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}/s"


def _count(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def _size(value: float | None) -> str:
    """Bytes for people: 1,023 B, 1.0 KiB, 12.3 MiB ..."""
    if value is None or value < 0:
        return "-"
    if value < 1024:
        return f"{value:,.0f} B"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1024 or unit == "TiB":
            break
    return f"{value:,.1f} {unit}"


def _byte_rate(value: float | None) -> str:
    return "-" if value is None else f"{_size(value)}/s"


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.0f}%"


def _int(value: str | None, name: str, default: int | None = None, minimum: int = 0) -> int:
    if value is None or value.strip() == "":
        if default is None:
            raise BadInput(f"{name} is required")
        return default
    try:
        number = int(value.strip())
    except ValueError:
        raise BadInput(f"{name}: expected an integer, got {value!r}") from None
    if number < minimum:
        raise BadInput(f"{name} must be at least {minimum}, got {number}")
    return number


def _field(form: FormData, name: str) -> str:
    value = form.get(name, "")
    return value if isinstance(value, str) else ""


async def _offsets(
    console: Console,
    tps: Iterable[TopicPartition],
    spec: str | int,
    isolation: str = "read_uncommitted",
) -> dict[TopicPartition, int]:
    """The offset ``spec`` names (earliest, latest, a timestamp in ms) of each of ``tps``."""
    wanted = dict.fromkeys(tps, spec)
    if not wanted:
        return {}
    found = await console.admin.list_offsets(wanted, isolation_level=isolation)
    return {tp: o.offset for tp, o in found.items()}


async def _log_bounds(
    console: Console, tps: Iterable[TopicPartition], isolation: str = "read_uncommitted"
) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
    """Log start and end of each of ``tps``, asked at once; read_committed ends at the last
    stable offset (an open transaction's records wait)."""
    wanted = list(tps)
    return await asyncio.gather(
        _offsets(console, wanted, "earliest"), _offsets(console, wanted, "latest", isolation)
    )


async def _read_plan(
    console: Console,
    name: str,
    partitions: Iterable[int],
    spec: browse.StartSpec,
    count: int,
    *,
    isolation: str = "read_uncommitted",
) -> tuple[dict[int, int], dict[int, int], dict[int, int]]:
    """Where a read of ``count`` records per partition of ``name`` starts (``spec``), and
    each partition's log start and end: ``(positions, starts, ends)`` by partition."""
    tps = {p: TopicPartition(name, p) for p in partitions}
    found_starts, found_ends = await _log_bounds(console, tps.values(), isolation)
    starts = {p: found_starts[tp] for p, tp in tps.items()}
    ends = {p: found_ends[tp] for p, tp in tps.items()}
    by_time = None
    if spec.mode == "timestamp":
        found = await _offsets(console, tps.values(), spec.value)
        by_time = {p: found[tp] for p, tp in tps.items()}
    return browse.start_positions(spec, count, starts, ends, by_time), starts, ends


Handler = Callable[[Console, Request], Awaitable[Response]]

_NOT_FOUND = (
    errors.UnknownTopicOrPartitionError,
    errors.GroupIdNotFoundError,
    errors.TransactionalIdNotFoundError,
)
_REFUSED = (
    errors.InvalidTopicError,
    errors.TopicAlreadyExistsError,
    errors.InvalidPartitionsError,
    errors.InvalidReplicationFactorError,
    errors.InvalidConfigError,
    errors.InvalidRequestError,
    errors.PolicyViolationError,
)


def status_for(exc: StromError) -> int:
    """404 for what does not exist, 400 for what the cluster refused as invalid, else 502."""
    if isinstance(exc, _NOT_FOUND):
        return 404
    return 400 if isinstance(exc, _REFUSED) else 502


def _route(console: Console, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        try:
            return await handler(console, request)
        except (BadInput, ConfigurationError, browse.BrowseError, filters.FilterError) as exc:
            return console.render(request, "error.html", 400, message=str(exc))
        except errors.NonEmptyGroupError as exc:
            return console.render(request, "error.html", 409, message=str(exc))
        except SchemaRegistryError as exc:
            status = exc.status if 400 <= exc.status < 500 else 502
            return console.render(request, "error.html", status, message=str(exc))
        except StromError as exc:
            log.info("cluster call failed", path=request.url.path, error=str(exc))
            return console.render(request, "error.html", status_for(exc), message=str(exc))

    return endpoint


# --- overview and topics --------------------------------------------------------------------


async def _overview_data(console: Console) -> overview.Overview:
    snap = await console.current()
    assert snap.overview is not None  # every sample derives it
    return snap.overview


async def page_overview(console: Console, request: Request) -> Response:
    return console.render(request, "overview.html", o=await _overview_data(console))


async def fragment_overview(console: Console, request: Request) -> Response:
    return console.render(request, "_overview.html", o=await _overview_data(console))


async def _topic_page(console: Console, request: Request) -> dict[str, Any]:
    """A page of the topics list (search and paging over the snapshot's rows, only the page
    rendered)."""
    q = request.query_params
    rows = (await console.current()).rows
    found = topics.search_topics(
        rows, q.get("q", ""), internal=q.get("internal") == "1", problems=q.get("problems") == "1"
    )
    page = topics.paginate(found, _int(q.get("page"), "page", 1, 1), _PER_PAGE)
    return {"page": page, "q": q.get("q", ""), "internal": q.get("internal") == "1",
            "problems": q.get("problems") == "1"}  # fmt: skip


async def page_topics(console: Console, request: Request) -> Response:
    return console.render(request, "topics.html", **await _topic_page(console, request))


async def fragment_topics(console: Console, request: Request) -> Response:
    return console.render(request, "_topics.html", **await _topic_page(console, request))


async def create_topic(console: Console, request: Request) -> Response:
    form = await request.form()
    name = _field(form, "name").strip()
    if not name:
        raise BadInput("the topic name is empty")
    await console.admin.create_topics(
        [
            NewTopic(
                name,
                _int(_field(form, "partitions"), "partitions", 1, 1),
                _int(_field(form, "replication"), "replication", 1, 1),
            )
        ]
    )
    console.changed()
    return RedirectResponse(f"/topics/{name}", 303)


async def _partitions(console: Console, name: str) -> tuple[Any, list[dict[str, Any]]]:
    described = (await console.admin.describe_topics([name]))[0]
    tps = {p.partition: TopicPartition(name, p.partition) for p in described.partitions}
    live = [tp for p, tp in tps.items() if described.partitions[p].leader >= 0]
    starts, ends = await _log_bounds(console, live)
    min_isr = console.sampler.min_isr.get(name, 1)
    snap = console.sampler.snapshot  # sizes as last sampled: never waited for here
    rows = []
    for p in described.partitions:
        tp = tps[p.partition]
        start, end = starts.get(tp), ends.get(tp)
        replicas = snap.replica_sizes.get(tp, {})
        rows.append(
            {
                "p": p,
                "start": start,
                "end": end,
                "messages": end - start if start is not None and end is not None else None,
                "health": topics.health(p, min_isr),
                "preferred": bool(p.replicas) and p.leader == p.replicas[0],
                "size": snap.sizes.get(tp),
                "replica_sizes": [(r, replicas.get(r)) for r in p.replicas],
            }
        )
    return described, rows


async def page_topic(console: Console, request: Request) -> Response:
    name = request.path_params["name"]
    described, rows = await _partitions(console, name)
    configs = await console.admin.describe_configs(name)
    reassignments = {
        tp.partition: r
        for tp, r in (await console.admin.list_partition_reassignments()).items()
        if tp.topic == name
    }
    return console.render(
        request,
        "topic.html",
        topic=described,
        rows=rows,
        interval_s=console.config.sample_interval_s,
        sampled=next((r for r in console.sampler.snapshot.rows if r.name == name), None),
        configs=sorted(configs.values(), key=lambda c: c.name),
        reassignments=reassignments,
        notice=request.query_params.get("notice", ""),
    )


async def alter_config(console: Console, request: Request) -> Response:
    name = request.path_params["name"]
    form = await request.form()
    key = _field(form, "config").strip()
    if not key:
        raise BadInput("the config name is empty")
    if _field(form, "action") == "delete":
        await console.admin.alter_configs(name, delete_configs=[key])
        notice = f"{key} reset to its default"
    else:
        await console.admin.alter_configs(name, set_configs={key: _field(form, "value")})
        notice = f"{key} set"
    console.sampler.min_isr.pop(name, None)
    return RedirectResponse(f"/topics/{name}?notice={notice}", 303)


async def add_partitions(console: Console, request: Request) -> Response:
    name = request.path_params["name"]
    form = await request.form()
    count = _int(_field(form, "count"), "count", minimum=1)
    await console.admin.create_partitions({name: count})
    console.changed()
    return RedirectResponse(f"/topics/{name}?notice=now {count} partitions", 303)


async def delete_topic(console: Console, request: Request) -> Response:
    name = request.path_params["name"]
    form = await request.form()
    if _field(form, "confirm") != name:
        raise BadInput(f"type the topic's name ({name}) to confirm its deletion")
    await console.admin.delete_topics([name])
    console.changed()
    return RedirectResponse("/topics", 303)


async def elect_leaders(console: Console, request: Request) -> Response:
    name = request.path_params["name"]
    described = (await console.admin.describe_topics([name]))[0]
    outcome = await console.admin.elect_leaders(
        "preferred", [TopicPartition(name, p.partition) for p in described.partitions]
    )
    elected = sum(code == "NONE" for code in outcome.values())
    console.changed()
    return RedirectResponse(
        f"/topics/{name}?notice=preferred leaders elected on {elected} partition(s)", 303
    )


def parse_reassignment(text: str, partitions: int) -> dict[int, list[int]]:
    """``partition: broker,broker,...`` lines -> the new replica lists (first: preferred)."""
    plan: dict[int, list[int]] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        head, sep, tail = line.partition(":")
        try:
            partition = int(head)
            brokers = [int(b) for b in tail.replace(" ", "").split(",") if b]
        except ValueError:
            raise BadInput(f"line {number}: expected 'partition: broker,broker,...'") from None
        if not sep or not brokers:
            raise BadInput(f"line {number}: expected 'partition: broker,broker,...'")
        if not 0 <= partition < partitions:
            raise BadInput(f"line {number}: the topic has no partition {partition}")
        if len(set(brokers)) != len(brokers):
            raise BadInput(f"line {number}: a broker is listed twice")
        plan[partition] = brokers
    if not plan:
        raise BadInput("the reassignment is empty")
    return plan


async def reassign(console: Console, request: Request) -> Response:
    name = request.path_params["name"]
    form = await request.form()
    described = (await console.admin.describe_topics([name]))[0]
    plan = parse_reassignment(_field(form, "plan"), len(described.partitions))
    current = {p.partition: list(p.replicas) for p in described.partitions}
    changed = {p: r for p, r in plan.items() if current.get(p) != r}
    if changed:
        await console.admin.alter_partition_reassignments(
            {TopicPartition(name, p): r for p, r in changed.items()}
        )
        console.changed()
    return RedirectResponse(
        f"/topics/{name}?notice=reassignment of {len(changed)} partition(s) started", 303
    )


# --- messages ------------------------------------------------------------------------------


async def page_messages(console: Console, request: Request) -> Response:
    name = request.path_params["name"]
    q = request.query_params
    described = (await console.admin.describe_topics([name]))[0]
    all_partitions = [p.partition for p in described.partitions]
    choice = q.get("partition", "all")
    chosen = all_partitions if choice == "all" else [_int(choice, "partition")]
    if any(p not in all_partitions for p in chosen):
        raise BadInput(f"{name} has no partition {choice}")
    page_size = _int(q.get("page_size"), "page_size", 20, 1)
    if page_size > console.config.max_page_size:
        raise BadInput(f"page_size is at most {console.config.max_page_size}")
    fmt = q.get("format", "text")
    if fmt not in messages.FORMATS:
        raise BadInput(f"format must be one of {', '.join(messages.FORMATS)}")
    spec = browse.StartSpec.parse(q.get("start", "latest"), q.get("value", ""))
    isolation = q.get("isolation", "read_uncommitted")
    if isolation not in browse.ISOLATION_LEVELS:
        raise BadInput(f"isolation must be one of {', '.join(browse.ISOLATION_LEVELS)}")
    positions, starts, ends = await _read_plan(
        console, name, chosen, spec, page_size, isolation=isolation
    )
    if q.get("from"):  # "next page": per-partition positions of the previous page's end
        positions = {**positions, **_parse_positions(q["from"], positions)}

    def shape(r: ConsumerRecord) -> messages.ShownRecord:
        return messages.show_record(
            partition=r.partition,
            offset=r.offset,
            timestamp=r.timestamp,
            key=r.key,
            value=r.value,
            headers=r.headers,
            fmt=fmt,
            limit=console.config.display_bytes,
        )

    read = await browse.read_page(
        console.connection,
        name,
        positions,
        ends,
        page_size,
        shape=shape,
        timeout_s=_BROWSE_TIMEOUT_S,
        request_timeout_ms=console.config.request_timeout_ms,
        isolation_level=isolation,
    )
    shown = [r for p in chosen for r in read[p]]
    shown.sort(key=lambda r: (r.timestamp, r.partition, r.offset))
    following = browse.next_positions(positions, read)
    more = any(following[p] < ends[p] for p in chosen)
    return console.render(
        request,
        "messages.html",
        topic=described,
        records=shown,
        partitions=all_partitions,
        choice=choice,
        start=spec.mode,
        value=q.get("value", ""),
        page_size=page_size,
        fmt=fmt,
        formats=messages.FORMATS,
        modes=browse.START_MODES,
        isolation=isolation,
        isolations=browse.ISOLATION_LEVELS,
        ranges={p: (starts[p], ends[p]) for p in chosen},
        next_from=",".join(f"{p}:{o}" for p, o in sorted(following.items())) if more else "",
        display_bytes=console.config.display_bytes,
    )


def _parse_positions(text: str, allowed: dict[int, int]) -> dict[int, int]:
    found = {}
    for item in text.split(","):
        head, _, tail = item.partition(":")
        partition, offset = _int(head, "from partition"), _int(tail, "from offset")
        if partition in allowed:
            found[partition] = offset
    return found


async def page_produce(console: Console, request: Request) -> Response:
    name = request.path_params["name"]
    described = (await console.admin.describe_topics([name]))[0]
    return console.render(request, "produce.html", topic=described, result=None)


def parse_headers(text: str) -> list[tuple[str, bytes]]:
    """``name: value`` lines -> record headers (a value may be empty)."""
    headers = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        name, sep, value = line.partition(":")
        if not sep or not name.strip():
            raise BadInput(f"header line {number}: expected 'name: value'")
        headers.append((name.strip(), value.strip().encode()))
    return headers


async def produce(console: Console, request: Request) -> Response:
    name = request.path_params["name"]
    form = await request.form()
    described = (await console.admin.describe_topics([name]))[0]
    choice = _field(form, "partition").strip()
    partition = None if choice in ("", "any") else _int(choice, "partition")
    if partition is not None and partition >= len(described.partitions):
        raise BadInput(f"{name} has no partition {partition}")
    key = _field(form, "key")
    producer = await console.producer()
    future = await producer.send(
        name,
        value=_field(form, "value").encode(),
        key=key.encode() if key != "" else None,
        headers=parse_headers(_field(form, "headers")),
        partition=partition,
    )
    meta = await future
    return console.render(request, "produce.html", topic=described, result=meta)


# --- search --------------------------------------------------------------------------------


async def page_search_form(console: Console, request: Request) -> Response:
    name = request.path_params["name"]
    described = (await console.admin.describe_topics([name]))[0]
    return console.render(
        request,
        "search_form.html",
        topic=described,
        max_records=console.config.search_max_records,
        modes=browse.START_MODES,
    )


async def start_search(console: Console, request: Request) -> Response:
    form = await request.form()
    name = _field(form, "topic")
    described = (await console.admin.describe_topics([name]))[0]
    mode = _field(form, "mode")
    query = _field(form, "query")
    matcher = (
        filters.compile_filter(query) if mode == "filter" else filters.substring_matcher(query)
    )
    limit = min(
        _int(_field(form, "max_records"), "max_records", console.config.search_max_records, 1),
        console.config.search_max_records,
    )
    spec = browse.StartSpec.parse(_field(form, "start") or "earliest", _field(form, "value"))
    partitions = [p.partition for p in described.partitions]
    positions, _, ends = await _read_plan(console, name, partitions, spec, limit)
    try:
        job = console.searches.start(
            topic=name,
            query=query,
            mode="filter" if mode == "filter" else "text",
            matcher=matcher,
            positions=positions,
            ends=ends,
            max_records=limit,
            max_results=100,
            max_seconds=console.config.search_max_seconds,
            display_bytes=console.config.display_bytes,
        )
    except TooManySearchesError as exc:
        raise BadInput(str(exc)) from None
    return RedirectResponse(f"/search/{job.id}", 303)


def _job(console: Console, request: Request) -> Any:
    job = console.searches.get(request.path_params["job"])
    if job is None:
        raise BadInput("no such search (searches are kept while the console runs, 8 at most)")
    return job


async def page_search(console: Console, request: Request) -> Response:
    return console.render(request, "search.html", job=_job(console, request))


async def fragment_search(console: Console, request: Request) -> Response:
    return console.render(request, "_search.html", job=_job(console, request))


async def stop_search(console: Console, request: Request) -> Response:
    job = console.searches.stop(request.path_params["job"])
    if job is None:
        raise BadInput("no such search")
    return RedirectResponse(f"/search/{job.id}", 303)


# --- groups --------------------------------------------------------------------------------


async def _groups_page(console: Console, request: Request) -> dict[str, Any]:
    q = request.query_params
    snap = await console.current()
    needle = q.get("q", "").strip().lower()
    found = [g for g in snap.groups if needle in g.group_id.lower()]
    page = topics.paginate(found, _int(q.get("page"), "page", 1, 1), _PER_PAGE)
    return {"page": page, "q": q.get("q", ""), "lags": snap.group_lag}


async def page_groups(console: Console, request: Request) -> Response:
    return console.render(request, "groups.html", **await _groups_page(console, request))


async def fragment_groups(console: Console, request: Request) -> Response:
    return console.render(request, "_groups.html", **await _groups_page(console, request))


async def _committed(console: Console, group_id: str) -> dict[TopicPartition, int]:
    found = await console.admin.list_consumer_group_offsets(group_id)
    return {tp: o.offset for tp, o in found.items()}


async def _ends(
    console: Console, committed: dict[TopicPartition, int], wanted: Iterable[TopicPartition]
) -> dict[TopicPartition, int]:
    """End offsets of ``wanted`` from the last sample; asked of the leaders only for the
    partitions the sample lacks or shows behind a committed offset (it is older)."""
    sampled = console.sampler.snapshot.ends
    ends, missing = {}, []
    for tp in wanted:
        end = sampled.get(tp)
        if end is None or end < committed.get(tp, 0):
            missing.append(tp)
        else:
            ends[tp] = end
    ends.update(await _offsets(console, missing, "latest"))
    return ends


async def _group_data(console: Console, group_id: str) -> dict[str, Any]:
    found, committed = await asyncio.gather(
        console.admin.describe_consumer_groups([group_id]), _committed(console, group_id)
    )
    described = found[group_id]
    assigned = {
        tp: f"{m.client_id} ({m.host})"
        for m in described.members
        for tp in m.assignment.topic_partitions
    }
    wanted = set(committed) | set(assigned)
    ends = await _ends(console, committed, wanted)
    rows = offsets_plan.lag_rows(committed, ends, assigned)
    history = console.sampler.history.samples(group_id)
    return {
        "group": described,
        "rows": rows,
        "members": assigned,
        "total": offsets_plan.total_lag(rows),
        "chart": line_chart([(t, float(v)) for t, v in history]),
        "window_s": console.config.lag_window_s,
        "interval_s": console.config.sample_interval_s,
        "resettable": described.state in offsets_plan.RESETTABLE_STATES,
        "topics": sorted({tp.topic for tp in wanted}),
    }


async def page_group(console: Console, request: Request) -> Response:
    data = await _group_data(console, request.path_params["group"])
    return console.render(request, "group.html", plan=None, **data)


async def fragment_group(console: Console, request: Request) -> Response:
    data = await _group_data(console, request.path_params["group"])
    return console.render(request, "_group.html", **data)


async def reset_offsets(console: Console, request: Request) -> Response:
    """Dry run (the plan) or apply (``apply=1``) of an offset reset of an empty group."""
    group_id = request.path_params["group"]
    form = await request.form()
    described = (await console.admin.describe_consumer_groups([group_id]))[group_id]
    strategy = offsets_plan.ResetSpec.parse(_field(form, "strategy"), _field(form, "value"))
    committed = await _committed(console, group_id)
    topic = _field(form, "topic").strip()
    partition = _field(form, "partition").strip()
    if topic:
        meta = (await console.admin.describe_topics([topic]))[0]
        partitions = [TopicPartition(topic, p.partition) for p in meta.partitions]
        if partition:
            number = _int(partition, "partition")
            partitions = [tp for tp in partitions if tp.partition == number]
            if not partitions:
                raise BadInput(f"{topic} has no partition {number}")
    else:
        partitions = sorted(committed)
    if not partitions:
        raise BadInput(f"group {group_id} has no committed offsets: name a topic to reset")
    log_starts, log_ends = await _log_bounds(console, partitions)
    by_time = None
    if strategy.kind == "timestamp":
        by_time = await _offsets(console, partitions, strategy.value)
    plan = offsets_plan.plan_reset(
        strategy,
        partitions,
        group_id=group_id,
        committed=committed,
        log_starts=log_starts,
        log_ends=log_ends,
        by_timestamp=by_time,
    )
    applied = False
    if _field(form, "apply") == "1":
        offsets_plan.check_resettable(group_id, described.state, len(described.members))
        await console.admin.alter_consumer_group_offsets(
            group_id, {row.tp: row.target for row in plan}
        )
        applied = True
        console.changed()
    data = await _group_data(console, group_id)
    return console.render(
        request,
        "group.html",
        plan=plan,
        applied=applied,
        form={k: _field(form, k) for k in ("strategy", "value", "topic", "partition")},
        **data,
    )


# --- transactions --------------------------------------------------------------------------


async def page_transactions(console: Console, request: Request) -> Response:
    state = request.query_params.get("state", "")
    listed = await console.admin.list_transactions(states=[state] if state else None)
    return console.render(request, "transactions.html", listed=listed, state=state)


async def page_transaction(console: Console, request: Request) -> Response:
    tid = request.path_params["tid"]
    described = (await console.admin.describe_transactions([tid]))[tid]
    return console.render(request, "transaction.html", t=described, now_ms=int(time.time() * 1000))


# --- schemas (read-only, from the schema registry) -----------------------------------------


def _registry_client(
    url: str, timeout_ms: int, security: dict[str, Any] | None
) -> SchemaRegistryClient:
    """The registry as the user the console reaches the cluster as (HTTP Basic with its SASL
    name and password, the cluster's CA for https), as a secure registry expects."""
    security = security or {}
    user, password = security.get("sasl_plain_username"), security.get("sasl_plain_password")
    return SchemaRegistryClient(
        url,
        timeout_s=timeout_ms / 1000,
        basic_auth_user_info=f"{user}:{password}" if user and password is not None else None,
        ssl_cafile=security.get("ssl_cafile") if url.startswith("https://") else None,
    )


def _registry(console: Console) -> SchemaRegistryClient:
    if console.registry is None:
        raise BadInput("no schema registry is configured (--schema-registry-url)")
    return console.registry


async def page_schemas(console: Console, request: Request) -> Response:
    registry = _registry(console)
    q = request.query_params
    subjects = await asyncio.to_thread(registry.subjects)
    needle = q.get("q", "").strip().lower()
    found = sorted(s for s in subjects if needle in s.lower())
    page = topics.paginate(found, _int(q.get("page"), "page", 1, 1), _PER_PAGE)

    def details() -> tuple[str, list[tuple[str, Any]]]:
        level = registry.compatibility()
        return level, [(s, registry.version(s, "latest")) for s in page.items]

    level, latest = await asyncio.to_thread(details)
    return console.render(
        request, "schemas.html", page=page, latest=latest, q=q.get("q", ""), level=level
    )


async def page_subject(console: Console, request: Request) -> Response:
    registry = _registry(console)
    subject = request.path_params["subject"]
    wanted = request.query_params.get("version", "latest")
    version: int | str = "latest" if wanted == "latest" else _int(wanted, "version", minimum=1)

    def read() -> tuple[list[int], Any, str]:
        return (
            registry.versions(subject),
            registry.version(subject, version),
            registry.compatibility(subject),
        )

    versions, shown, level = await asyncio.to_thread(read)
    text = shown.schema
    if shown.schema_type in ("AVRO", "JSON"):
        with contextlib.suppress(ValueError):
            text = json.dumps(json.loads(text), indent=2)
    return console.render(
        request, "subject.html", subject=subject, versions=versions, shown=shown, text=text,
        level=level,
    )  # fmt: skip


# --- login ---------------------------------------------------------------------------------


async def page_login(console: Console, request: Request) -> Response:
    return console.render(request, "login.html", failed=False)


async def login(console: Console, request: Request) -> Response:
    form = await request.form()
    session = session_of(request.scope)
    if console.password is not None and password_ok(
        console.config.user, console.password, _field(form, "user"), _field(form, "password")
    ):
        # A new session id on login: an id planted before it is worth nothing after it.
        console.sessions.drop(session.id)
        fresh = console.sessions.new()
        fresh.user = console.config.user
        response = RedirectResponse("/", 303)
        response.set_cookie(
            "strom_console_session", fresh.id, httponly=True, samesite="strict", path="/"
        )
        log.info("login", user=fresh.user)
        return response
    return console.render(request, "login.html", 401, failed=True)


async def logout(console: Console, request: Request) -> Response:
    console.sessions.drop(session_of(request.scope).id)
    response = RedirectResponse("/login" if console.password is not None else "/", 303)
    response.delete_cookie("strom_console_session", path="/")
    return response


async def healthz(console: Console, request: Request) -> Response:
    return PlainTextResponse("ok")


def build_app(
    config: ConsoleConfig, password: str | None = None, security: dict[str, Any] | None = None
) -> Guard:
    """The console's ASGI app for ``config`` (``password``: the login's, None for no login;
    ``security``: the clients' security options, from ``--command-config``)."""
    console = Console(config, password, security)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        console.sampler.start()
        try:
            yield
        finally:
            await console.close()

    def r(path: str, handler: Handler, methods: tuple[str, ...] = ("GET",)) -> Route:
        return Route(path, _route(console, handler), methods=list(methods))

    post = ("POST",)
    routes = [
        r("/", page_overview),
        r("/healthz", healthz),
        r("/fragments/overview", fragment_overview),
        r("/topics", page_topics),
        r("/fragments/topics", fragment_topics),
        r("/topics/new", create_topic, post),
        r("/topics/{name}", page_topic),
        r("/topics/{name}/configs", alter_config, post),
        r("/topics/{name}/partitions", add_partitions, post),
        r("/topics/{name}/delete", delete_topic, post),
        r("/topics/{name}/elect", elect_leaders, post),
        r("/topics/{name}/reassign", reassign, post),
        r("/topics/{name}/messages", page_messages),
        r("/topics/{name}/produce", page_produce),
        r("/topics/{name}/produce", produce, post),
        r("/topics/{name}/search", page_search_form),
        r("/search/start", start_search, post),
        r("/search/{job}", page_search),
        r("/fragments/search/{job}", fragment_search),
        r("/search/{job}/stop", stop_search, post),
        r("/groups", page_groups),
        r("/fragments/groups", fragment_groups),
        r("/groups/{group}", page_group),
        r("/fragments/groups/{group}", fragment_group),
        r("/groups/{group}/reset", reset_offsets, post),
        r("/transactions", page_transactions),
        r("/transactions/{tid}", page_transaction),
        r("/schemas", page_schemas),
        r("/schemas/{subject}", page_subject),
        r("/login", page_login),
        r("/login", login, post),
        r("/logout", logout, post),
        Mount("/static", StaticFiles(directory=_HERE / "static"), name="static"),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.console = console
    return Guard(
        app, console.sessions, read_only=config.read_only, login_required=password is not None
    )

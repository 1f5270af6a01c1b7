"""Browsing a topic's messages a page at a time, and producing one record."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from strom.types import ConsumerRecord
from strom_console import browse, messages, reads
from strom_console.web import BadInput, Console, form_field, int_param

_BROWSE_TIMEOUT_S = 5.0


async def page_messages(console: Console, request: Request) -> Response:
    name = request.path_params["name"]
    q = request.query_params
    described = (await console.admin.describe_topics([name]))[0]
    all_partitions = [p.partition for p in described.partitions]
    choice = q.get("partition", "all")
    chosen = all_partitions if choice == "all" else [int_param(choice, "partition")]
    if any(p not in all_partitions for p in chosen):
        raise BadInput(f"{name} has no partition {choice}")
    page_size = int_param(q.get("page_size"), "page_size", 20, 1)
    if page_size > console.config.max_page_size:
        raise BadInput(f"page_size is at most {console.config.max_page_size}")
    fmt = q.get("format", "text")
    if fmt not in messages.FORMATS:
        raise BadInput(f"format must be one of {', '.join(messages.FORMATS)}")
    spec = browse.StartSpec.parse(q.get("start", "latest"), q.get("value", ""))
    isolation = q.get("isolation", "read_uncommitted")
    if isolation not in browse.ISOLATION_LEVELS:
        raise BadInput(f"isolation must be one of {', '.join(browse.ISOLATION_LEVELS)}")
    positions, starts, ends = await reads.read_plan(
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
        partition, offset = int_param(head, "from partition"), int_param(tail, "from offset")
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
    choice = form_field(form, "partition").strip()
    partition = None if choice in ("", "any") else int_param(choice, "partition")
    if partition is not None and partition >= len(described.partitions):
        raise BadInput(f"{name} has no partition {partition}")
    key = form_field(form, "key")
    producer = await console.producer()
    future = await producer.send(
        name,
        value=form_field(form, "value").encode(),
        key=key.encode() if key != "" else None,
        headers=parse_headers(form_field(form, "headers")),
        partition=partition,
    )
    meta = await future
    return console.render(request, "produce.html", topic=described, result=meta)

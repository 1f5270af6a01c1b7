"""The topics list and a topic's page, and what the console changes on a topic: create,
configs, partitions, delete, preferred-leader election, reassignment."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from strom.types import NewTopic, TopicPartition
from strom_console import reads, topics
from strom_console.web import PER_PAGE, BadInput, Console, form_field, int_param


async def _topic_page(console: Console, request: Request) -> dict[str, Any]:
    """A page of the topics list (search and paging over the snapshot's rows, only the page
    rendered)."""
    q = request.query_params
    rows = (await console.current()).rows
    found = topics.search_topics(
        rows, q.get("q", ""), internal=q.get("internal") == "1", problems=q.get("problems") == "1"
    )
    page = topics.paginate(found, int_param(q.get("page"), "page", 1, 1), PER_PAGE)
    return {"page": page, "q": q.get("q", ""), "internal": q.get("internal") == "1",
            "problems": q.get("problems") == "1"}  # fmt: skip


async def page_topics(console: Console, request: Request) -> Response:
    return console.render(request, "topics.html", **await _topic_page(console, request))


async def fragment_topics(console: Console, request: Request) -> Response:
    return console.render(request, "_topics.html", **await _topic_page(console, request))


async def create_topic(console: Console, request: Request) -> Response:
    form = await request.form()
    name = form_field(form, "name").strip()
    if not name:
        raise BadInput("the topic name is empty")
    await console.admin.create_topics(
        [
            NewTopic(
                name,
                int_param(form_field(form, "partitions"), "partitions", 1, 1),
                int_param(form_field(form, "replication"), "replication", 1, 1),
            )
        ]
    )
    console.changed()
    return RedirectResponse(f"/topics/{name}", 303)


async def _partitions(console: Console, name: str) -> tuple[Any, list[dict[str, Any]]]:
    described = (await console.admin.describe_topics([name]))[0]
    tps = {p.partition: TopicPartition(name, p.partition) for p in described.partitions}
    live = [tp for p, tp in tps.items() if described.partitions[p].leader >= 0]
    starts, ends = await reads.log_bounds(console, live)
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
    key = form_field(form, "config").strip()
    if not key:
        raise BadInput("the config name is empty")
    if form_field(form, "action") == "delete":
        await console.admin.alter_configs(name, delete_configs=[key])
        notice = f"{key} reset to its default"
    else:
        await console.admin.alter_configs(name, set_configs={key: form_field(form, "value")})
        notice = f"{key} set"
    console.sampler.min_isr.pop(name, None)
    return RedirectResponse(f"/topics/{name}?notice={notice}", 303)


async def add_partitions(console: Console, request: Request) -> Response:
    name = request.path_params["name"]
    form = await request.form()
    count = int_param(form_field(form, "count"), "count", minimum=1)
    await console.admin.create_partitions({name: count})
    console.changed()
    return RedirectResponse(f"/topics/{name}?notice=now {count} partitions", 303)


async def delete_topic(console: Console, request: Request) -> Response:
    name = request.path_params["name"]
    form = await request.form()
    if form_field(form, "confirm") != name:
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
    plan = parse_reassignment(form_field(form, "plan"), len(described.partitions))
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

"""Consumer groups: the list, a group's lag and members, and offset resets (dry run or
applied, planned by ``strom.group.offsets_plan``)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from strom.group import offsets_plan
from strom.types import TopicPartition
from strom_console import reads, topics
from strom_console.charts import line_chart
from strom_console.web import PER_PAGE, BadInput, Console, form_field, int_param


async def _groups_page(console: Console, request: Request) -> dict[str, Any]:
    q = request.query_params
    snap = await console.current()
    needle = q.get("q", "").strip().lower()
    found = [g for g in snap.groups if needle in g.group_id.lower()]
    page = topics.paginate(found, int_param(q.get("page"), "page", 1, 1), PER_PAGE)
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
    ends.update(await reads.offsets(console, missing, "latest"))
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
    strategy = offsets_plan.ResetSpec.parse(form_field(form, "strategy"), form_field(form, "value"))
    committed = await _committed(console, group_id)
    topic = form_field(form, "topic").strip()
    partition = form_field(form, "partition").strip()
    if topic:
        meta = (await console.admin.describe_topics([topic]))[0]
        partitions = [TopicPartition(topic, p.partition) for p in meta.partitions]
        if partition:
            number = int_param(partition, "partition")
            partitions = [tp for tp in partitions if tp.partition == number]
            if not partitions:
                raise BadInput(f"{topic} has no partition {number}")
    else:
        partitions = sorted(committed)
    if not partitions:
        raise BadInput(f"group {group_id} has no committed offsets: name a topic to reset")
    log_starts, log_ends = await reads.log_bounds(console, partitions)
    by_time = None
    if strategy.kind == "timestamp":
        by_time = await reads.offsets(console, partitions, strategy.value)
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
    if form_field(form, "apply") == "1":
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
        form={k: form_field(form, k) for k in ("strategy", "value", "topic", "partition")},
        **data,
    )

"""Searches over a topic (text or filter expressions), run in the background by
``strom_console.search``: the form, starting one, its progress page, stopping it."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from strom_console import browse, filters, reads
from strom_console.search import TooManySearchesError
from strom_console.web import BadInput, Console, form_field, int_param


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
    name = form_field(form, "topic")
    described = (await console.admin.describe_topics([name]))[0]
    mode = form_field(form, "mode")
    query = form_field(form, "query")
    matcher = (
        filters.compile_filter(query) if mode == "filter" else filters.substring_matcher(query)
    )
    limit = min(
        int_param(
            form_field(form, "max_records"), "max_records", console.config.search_max_records, 1
        ),
        console.config.search_max_records,
    )
    spec = browse.StartSpec.parse(
        form_field(form, "start") or "earliest", form_field(form, "value")
    )
    partitions = [p.partition for p in described.partitions]
    positions, _, ends = await reads.read_plan(console, name, partitions, spec, limit)
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

"""Schemas, read-only from the schema registry: subjects and a subject's versions."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from strom.serde import SchemaRegistryClient
from strom_console import topics
from strom_console.web import PER_PAGE, BadInput, Console, int_param


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
    page = topics.paginate(found, int_param(q.get("page"), "page", 1, 1), PER_PAGE)

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
    version: int | str = "latest" if wanted == "latest" else int_param(wanted, "version", minimum=1)

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

"""The registry's REST API served by the shared HTTP layer on 127.0.0.1, over an in-memory
store: Confluent's answers at the HTTP level (statuses, error bodies, unknown routes and
methods, a body that is not JSON or too large), a subject holding a ``/`` sent as ``%2F``,
Strom's headers as written, and the health endpoints."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import httpx2
import pytest

from strom_registry.http import Node, build_app
from strom_registry.records import Record
from strom_registry.registry import Registry
from strom_registry.state import RegistryState
from strom_server.http.server import HttpServer

pytestmark = pytest.mark.timeout(30)

SCHEMA = '{"type": "record", "name": "R", "fields": [{"name": "a", "type": "string"}]}'


class _Store:
    def __init__(self, state: RegistryState) -> None:
        self.state = state
        self.next = 1
        self.written = 0

    async def sync(self) -> None:
        return None

    async def write(self, batch: Sequence[Record]) -> None:
        for key, value in batch:
            self.state.apply(key, value)
            self.written += 1

    async def next_id(self, at_least: int) -> int:
        self.next = max(self.next, at_least) + 1
        return self.next - 1


async def _wait(_offset: int) -> None:
    return None


def test_confluent_answers_over_http() -> None:
    state = RegistryState()
    store = _Store(state)
    node = Node(Registry(state, store), lambda: True, lambda: None, lambda: store.written, _wait)

    async def scenario() -> None:
        app = build_app(node)
        server = HttpServer("127.0.0.1:0")
        port = await server.start(app)
        try:
            async with httpx2.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
                root = await http.get("/")
                assert root.json() == {}
                assert (b"X-Strom-Registry-Writer", b"true") in root.headers.raw
                assert (await http.get("/healthz")).text == "ok"

                made = await http.post("/subjects/a%2Fb-value/versions", json={"schema": SCHEMA})
                assert (made.status_code, made.json()) == (200, {"id": 1})
                assert (b"X-Strom-Registry-Offset", b"1") in made.headers.raw
                assert made.headers["content-type"].startswith(
                    "application/vnd.schemaregistry.v1+json"
                )
                assert (await http.get("/subjects")).json() == ["a/b-value"]
                version = (await http.get("/subjects/a%2Fb-value/versions/1")).json()
                assert (version["subject"], version["id"]) == ("a/b-value", 1)
                text = await http.get("/subjects/a%2Fb-value/versions/1/schema")
                assert text.json()["name"] == "R"
                assert text.headers["content-type"].startswith("application/json")

                missing = await http.get("/subjects/nope/versions/1")
                assert (missing.status_code, missing.json()["error_code"]) == (404, 40401)
                unknown = await http.get("/no/such/route")
                assert (unknown.status_code, unknown.json()) == (
                    404, {"error_code": 404, "message": "HTTP 404 Not Found"},
                )  # fmt: skip
                slash = await http.get("/subjects/")
                assert (slash.status_code, slash.json()["error_code"]) == (404, 404)
                method = await http.patch("/subjects")
                assert (method.status_code, method.json()["error_code"]) == (405, 405)
                bad = await http.post(
                    "/subjects/x-value/versions", content=b"{not json",
                    headers={"Content-Type": "application/json"},
                )  # fmt: skip
                assert (bad.status_code, bad.json()["error_code"]) == (400, 400)
                assert "not JSON" in bad.json()["message"]
                huge = await http.post("/subjects/x-value/versions", content=b" " * (1 << 21))
                assert (huge.status_code, huge.json()["error_code"]) == (413, 413)
        finally:
            await server.stop()
            await app.close()

    asyncio.run(scenario())

"""strom.serde's SchemaRegistryClient against a small HTTP/1.1 server on 127.0.0.1: calls
share kept-alive connections, refusals are SchemaRegistryError with the registry's status and
error code, Basic credentials from the URL are sent (and not kept in ``url``), and a registry
that cannot be reached is a StromError naming it."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from strom_testkit import free_port

from strom.errors import StromError
from strom.serde import SchemaRegistryClient, SchemaRegistryError

pytestmark = pytest.mark.timeout(30)


class _Registry(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive
    peers: list[int] = []
    auths: list[str | None] = []

    def _answer(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self.peers.append(self.client_address[1])
        self.auths.append(self.headers.get("Authorization"))
        if self.path == "/schemas/ids/1":
            self._answer(200, json.dumps({"schema": '"string"'}).encode())
        elif self.path == "/subjects?deleted=false":
            self._answer(200, b'["a-value"]')
        elif self.path == "/broken":
            self._answer(502, b"<html>bad gateway</html>", "text/html")
        else:
            body = {"error_code": 40403, "message": "Schema not found"}
            self._answer(404, json.dumps(body).encode())

    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture
def registry() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Registry)
    _Registry.peers.clear()
    _Registry.auths.clear()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_calls_share_a_kept_alive_connection_and_refusals_carry_codes(registry: str) -> None:
    with SchemaRegistryClient(f"http://{registry}") as client:
        assert client.schema(1).schema == '"string"'
        assert client.subjects() == ["a-value"]
        with pytest.raises(SchemaRegistryError) as refused:
            client.schema(7)
        assert (refused.value.status, refused.value.error_code) == (404, 40403)
        assert "Schema not found" in str(refused.value)
        with pytest.raises(SchemaRegistryError) as broken:
            client.request("GET", "/broken")
        assert (broken.value.status, broken.value.error_code) == (502, 502)
    assert len(_Registry.peers) == 4 and len(set(_Registry.peers)) == 1, _Registry.peers


def test_credentials_in_the_url_are_sent_not_kept(registry: str) -> None:
    client = SchemaRegistryClient(f"http://ops:s%3Acret@{registry}")
    try:
        assert client.url == f"http://{registry}"
        client.subjects()
    finally:
        client.close()
    assert _Registry.auths == ["Basic " + base64.b64encode(b"ops:s:cret").decode()]


def test_an_unreachable_registry_is_a_strom_error() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    client = SchemaRegistryClient(url, timeout_s=2)
    with pytest.raises(StromError, match="unreachable") as failed:
        client.subjects()
    assert url in str(failed.value) and not isinstance(failed.value, SchemaRegistryError)
    client.close()

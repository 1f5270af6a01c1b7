"""The shared HTTP layer (strom_server.http): exceptions to statuses, the credential checks,
and HttpServer serving on 127.0.0.1 (bound port, /healthz, /readyz, graceful stop, HTTPS with
client certificates from the security settings)."""

from __future__ import annotations

import asyncio
import base64
import socket
import ssl
from pathlib import Path

import httpx2
import pytest
from starlette.applications import Starlette

from strom import errors
from strom.errors import SaslAuthenticationFailedError, StromError
from strom.serde import SchemaRegistryError
from strom_server.http.auth import (
    ANONYMOUS,
    BasicAuth,
    OneUser,
    Unauthenticated,
    basic_credentials,
)
from strom_server.http.errors import status_for, status_of
from strom_server.http.health import health_routes
from strom_server.http.server import HttpServer
from strom_server.http.tls import HttpTls
from strom_server.runtime.config import ServerConfig
from strom_server.security.certificates import LocalCa

pytestmark = pytest.mark.timeout(30)


def _basic(text: str) -> str:
    return "Basic " + base64.b64encode(text.encode()).decode()


@pytest.mark.parametrize(
    ("exc", "status"),
    [
        (errors.UnknownTopicOrPartitionError("t"), 404),
        (errors.GroupIdNotFoundError("g"), 404),
        (errors.TransactionalIdNotFoundError("x"), 404),
        (errors.InvalidConfigError("c"), 400),
        (errors.TopicAlreadyExistsError("t"), 400),
        (errors.ConfigurationError("bad setting"), 400),
        (errors.NonEmptyGroupError("g"), 409),
        (SchemaRegistryError(404, 40401, "no subject"), 404),
        (SchemaRegistryError(422, 42201, "bad schema"), 422),
        (SchemaRegistryError(500, 50001, "store"), 502),
        (errors.StromTimeoutError("slow"), 502),
        (StromError("cluster down"), 502),
    ],
)
def test_cluster_failures_map_to_one_status(exc: StromError, status: int) -> None:
    assert status_for(exc) == status
    assert status_of(exc) == status


def test_statuses_of_other_exceptions() -> None:
    assert status_of(Unauthenticated("who are you")) == 401

    class Teapot(Exception):
        status = 418

    assert status_of(Teapot()) == 418
    assert status_of(ValueError("bug")) == 500
    assert status_of(KeyError("bug")) == 500


def test_basic_credentials_are_read_or_refused_with_a_reason() -> None:
    assert basic_credentials(_basic("alice:s3:cret")) == ("alice", "s3:cret")
    assert basic_credentials("basic " + _basic("bob:")[6:]) == ("bob", "")
    refusals = {
        None: "required",
        "": "required",
        "Bearer abc": "required",
        "Basic !!!": "malformed",
        _basic("no-colon"): "malformed",
        _basic(":password"): "malformed",
        "Basic " + base64.b64encode(b"\xff:x").decode(): "malformed",
    }
    for header, reason in refusals.items():
        with pytest.raises(Unauthenticated) as refused:
            basic_credentials(header, realm="r")
        assert reason in refused.value.message, header
        assert refused.value.challenge == 'Basic realm="r"'


def test_one_user_and_basic_auth_share_the_check() -> None:
    ops = OneUser("ops", "pw")
    assert asyncio.run(ops.check("ops", "pw")) == "User:ops"
    for user, password in (("ops", "PW"), ("OPS", "pw"), ("", ""), ("ops", "pw ")):
        with pytest.raises(SaslAuthenticationFailedError):
            asyncio.run(ops.check(user, password))
    auth = BasicAuth(ops, realm="console")
    assert asyncio.run(auth.principal(_basic("ops:pw"), "h")) == "User:ops"
    with pytest.raises(Unauthenticated) as refused:
        asyncio.run(auth.principal(_basic("ops:wrong"), "h"))
    assert "invalid credentials" in refused.value.message
    assert asyncio.run(BasicAuth(None).principal(None, "h")) == ANONYMOUS


def test_http_server_serves_health_on_a_bound_port_and_stops() -> None:
    ready = [False]
    app = Starlette(routes=health_routes(lambda: ready[0]))

    async def scenario() -> None:
        server = HttpServer("127.0.0.1:0", grace_s=1.0)
        port = await server.start(app)
        assert port > 0 and server.port == port
        async with httpx2.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            alive = await client.get("/healthz")
            assert (alive.status_code, alive.text) == (200, "ok")
            assert (await client.get("/readyz")).status_code == 503
            ready[0] = True
            assert (await client.get("/readyz")).text == "ready"
        await server.stop()
        await server.stop()  # idempotent
        with pytest.raises(httpx2.ConnectError):
            async with httpx2.AsyncClient() as client:
                await client.get(f"http://127.0.0.1:{port}/healthz")

    asyncio.run(scenario())


def test_https_from_the_security_settings_with_client_certificates(tmp_path: Path) -> None:
    """HttpTls.of(config): SSL with ssl.client.auth=required serves HTTPS to a caller with a
    certificate of the CA (the peer context presents the service's own, as a forwarded write
    does) and refuses one without; PLAINTEXT is plain HTTP."""
    ca = LocalCa(tmp_path / "ca")
    server_pair = ca.issue("server")
    config = ServerConfig(
        security_protocol="SSL",
        ssl_certfile=str(server_pair.certfile),
        ssl_keyfile=str(server_pair.keyfile),
        ssl_cafile=str(ca.cafile),
        ssl_client_auth="required",
    )
    tls = HttpTls.of(config)
    assert tls.scheme == "https" and HttpTls.of(ServerConfig()).scheme == "http"
    assert tls.client is not None and tls.server is not None

    async def scenario() -> None:
        server = HttpServer("127.0.0.1:0", tls=tls.server)
        port = await server.start(Starlette(routes=health_routes()))
        url = f"https://127.0.0.1:{port}/healthz"
        try:
            async with httpx2.AsyncClient(verify=tls.client) as client:
                assert (await client.get(url)).text == "ok"
            anonymous = ssl.create_default_context(cafile=str(ca.cafile))
            async with httpx2.AsyncClient(verify=anonymous) as client:
                with pytest.raises(httpx2.TransportError):
                    await client.get(url)
        finally:
            await server.stop()

    asyncio.run(scenario())


def test_accepted_connections_have_nagles_algorithm_off() -> None:
    """asyncio sets TCP_NODELAY only on accepted sockets whose protocol says TCP; a listening
    socket made without it (socket.create_server) left Nagle on, and every two-part response
    waited ~40 ms for the client's delayed ACK."""
    from strom_server.http.server import _listening_socket

    async def main() -> int:
        seen: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        class Probe(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                sock = transport.get_extra_info("socket")
                seen.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
                transport.close()

        sock = _listening_socket("127.0.0.1", 0)
        server = await asyncio.get_running_loop().create_server(Probe, sock=sock)
        port = sock.getsockname()[1]
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            return await asyncio.wait_for(seen, 10)
        finally:
            writer.close()
            server.close()
            await server.wait_closed()

    assert asyncio.run(main()) != 0

"""A stream outlives its login no longer than the token: the request after the token's expiry
ends the stream with a retriable NETWORK_EXCEPTION naming the cause (as Kafka closes a
connection whose session expired), and a new stream with the same token is refused."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
import grpc.aio
import pytest

from strom.cluster import translate_errors
from strom.errors import NetworkExceptionError, SaslAuthenticationFailedError
from strom_server.rpc.server import GrpcServer
from strom_server.runtime.config import ServerConfig
from strom_server.security.guard import RequestGuard, current_principal
from strom_server.security.tokens import TokenIssuer, TokenVerifier

pytestmark = pytest.mark.timeout(60)

METHOD = "/strom.test.Echo/Stream"
SECRET = b"s" * 32


class Clock:
    """Time as the test sets it."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


async def echo(
    requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext
) -> AsyncIterator[bytes]:
    async for request in requests:
        yield request + b" " + current_principal().encode()


def add_echo(servicer: object, server: grpc.aio.Server) -> None:
    handler = grpc.stream_stream_rpc_method_handler(echo)
    server.add_generic_rpc_handlers(
        [grpc.method_handlers_generic_handler("strom.test.Echo", {"Stream": handler})]
    )


def test_a_stream_ends_when_its_token_expires() -> None:
    clock = Clock()
    guard = RequestGuard(
        verifier=TokenVerifier(SECRET, clock=clock), authorizer=None, require_authentication=True
    )
    token = TokenIssuer(SECRET, 60, clock=clock).issue("User:bob")
    metadata = (("authorization", f"Bearer {token}"),)

    async def scenario() -> None:
        server = GrpcServer(ServerConfig(listen="127.0.0.1:0"), "test", guard=guard)
        server.add_service(add_echo, None)
        await server.start()
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{server.port}")
        try:
            call = channel.stream_stream(METHOD)(metadata=metadata, timeout=20)
            await call.write(b"one")
            assert await call.read() == b"one User:bob"
            clock.now += 59
            await call.write(b"two")
            assert await call.read() == b"two User:bob"
            clock.now += 2  # past the token's expiry
            await call.write(b"three")
            expired = "token of this stream has expired"
            with pytest.raises(NetworkExceptionError, match=expired), translate_errors("test"):
                await call.read()
            with (
                pytest.raises(SaslAuthenticationFailedError, match="expired"),
                translate_errors("test"),
            ):
                again = channel.stream_stream(METHOD)(metadata=metadata, timeout=20)
                await again.write(b"four")
                await again.read()
        finally:
            await channel.close()
            await server.stop(0)

    asyncio.run(scenario())

"""A GrpcServer with a TLS listener and the request guard, on loopback: client certificates as
principals (mTLS), tokens, refused plaintext and certificate-less clients, and a certificate
replaced on disk served to the next connection without a restart."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import grpc
import grpc.aio
import pytest

from strom.cluster import translate_errors
from strom.errors import (
    SaslAuthenticationFailedError,
    SslHandshakeFailedError,
    StromError,
)
from strom_server.rpc.server import GrpcServer
from strom_server.runtime.config import ServerConfig
from strom_server.security.certificates import LocalCa
from strom_server.security.guard import RequestGuard, current_principal
from strom_server.security.tls import listener_credentials
from strom_server.security.tokens import TokenIssuer, TokenVerifier

pytestmark = pytest.mark.timeout(60)

METHOD = "/strom.test.Echo/Whoami"
SECRET = b"s" * 32


async def whoami(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
    return current_principal().encode()


def add_echo(servicer: object, server: grpc.aio.Server) -> None:
    handler = grpc.unary_unary_rpc_method_handler(whoami)
    server.add_generic_rpc_handlers(
        [grpc.method_handlers_generic_handler("strom.test.Echo", {"Whoami": handler})]
    )


def credentials(ca: Path, client: tuple[Path, Path] | None) -> grpc.ChannelCredentials:
    return grpc.ssl_channel_credentials(
        ca.read_bytes(),
        private_key=client[1].read_bytes() if client else None,
        certificate_chain=client[0].read_bytes() if client else None,
    )


async def call(address: str, creds: grpc.ChannelCredentials | None, token: str = "") -> str:
    if creds is None:
        channel = grpc.aio.insecure_channel(address)
    else:
        channel = grpc.aio.secure_channel(address, creds)
    try:
        metadata = (("authorization", f"Bearer {token}"),) if token else None
        with translate_errors(address):
            reply = await channel.unary_unary(METHOD)(b"", timeout=10, metadata=metadata)
        return bytes(reply).decode()
    finally:
        await channel.close()


def test_mtls_principals_tokens_refusals_and_reload(tmp_path: Path) -> None:
    ca = LocalCa(tmp_path / "tls")
    server_pair = ca.issue("server")
    alice = ca.issue("alice-client", hosts=(), common_name="alice")
    stranger_ca = LocalCa(tmp_path / "other")
    stranger = stranger_ca.issue("mallory", hosts=(), common_name="mallory")
    guard = RequestGuard(
        verifier=TokenVerifier(SECRET),
        authorizer=None,
        require_authentication=True,
        certificate_principals=True,
    )
    listener = listener_credentials(
        "SSL", str(server_pair.certfile), str(server_pair.keyfile), str(ca.cafile), "required"
    )
    token = TokenIssuer(SECRET, 60).issue("User:bob")

    async def scenario() -> None:
        server = GrpcServer(
            ServerConfig(listen="127.0.0.1:0"), "test", guard=guard, credentials=listener
        )
        server.add_service(add_echo, None)
        await server.start()
        address = f"127.0.0.1:{server.port}"
        try:
            pair = (alice.certfile, alice.keyfile)
            assert await call(address, credentials(ca.cafile, pair)) == "User:alice"
            assert await call(address, credentials(ca.cafile, pair), token) == "User:bob"
            forged = TokenIssuer(b"x" * 32, 60).issue("User:admin")
            with pytest.raises(SaslAuthenticationFailedError, match="signature"):
                await call(address, credentials(ca.cafile, pair), forged)
            for refused in (
                None,  # plaintext to a TLS port
                credentials(ca.cafile, None),  # no client certificate
                credentials(ca.cafile, (stranger.certfile, stranger.keyfile)),  # foreign CA
            ):
                with pytest.raises(SslHandshakeFailedError, match=r"requires TLS.*certificate"):
                    await call(address, refused)

            # A new certificate from a new CA replaces the files: the next connection gets it.
            renewed_ca = LocalCa(tmp_path / "renewed")
            renewed = renewed_ca.issue("server")
            shutil.copy(renewed.certfile, server_pair.certfile)
            shutil.copy(renewed.keyfile, server_pair.keyfile)
            deadline = asyncio.get_running_loop().time() + 20
            while True:
                try:
                    principal = await call(address, credentials(renewed_ca.cafile, pair))
                    break
                except StromError:
                    if asyncio.get_running_loop().time() > deadline:
                        raise
                    await asyncio.sleep(0.2)
            assert principal == "User:alice"
        finally:
            await server.stop(0)

    asyncio.run(scenario())

"""The Kafka listener's SASL sessions over the real SCRAM authenticator (users in a dict instead
of etcd): SCRAM-SHA-256/512 and PLAIN logins, wrong passwords and unknown users, the order of
handshake and authenticate, what is served before login, the session's end and
re-authentication (KIP-368)."""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

import pytest

from strom.errors import ErrorCode
from strom.security.scram import (
    DEFAULT_ITERATIONS,
    ScramClient,
    ScramCredential,
    make_credential,
    salted_password,
)
from strom_gateway.kafka.protocol.messages import API_VERSIONS, METADATA, PRODUCE, SASL_AUTHENTICATE
from strom_gateway.kafka.sasl import SaslServer, SaslSession, session_margin_s
from strom_server.security.authentication import ScramAuthenticator
from strom_server.security.tokens import TokenIssuer, TokenVerifier

SECRET = secrets.token_bytes(32)
LIFETIME_S = 60.0


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def credential(mechanism: str, password: str) -> ScramCredential:
    salt = secrets.token_bytes(16)
    salted = salted_password(mechanism, password, salt, DEFAULT_ITERATIONS)
    return make_credential(mechanism, salted, salt, DEFAULT_ITERATIONS)


USERS = {
    "alice": [credential("SCRAM-SHA-256", "alice-pw"), credential("SCRAM-SHA-512", "alice-pw")],
    "bob": [credential("SCRAM-SHA-512", "bob-pw")],
}


async def lookup(user: str) -> list[ScramCredential]:
    return USERS.get(user, [])


async def no_wait(_: float) -> None:
    """Throttled attempts are answered at once here (the throttling is tested elsewhere)."""


def server(clock: Clock, *, plain: bool = True) -> SaslServer:
    issuer = TokenIssuer(SECRET, LIFETIME_S, clock=clock)
    authenticator = ScramAuthenticator(lookup, issuer, sleep=no_wait)
    return SaslServer(authenticator, lookup, plain=plain, clock=clock)


async def scram(session: SaslSession, mechanism: str, user: str, password: str) -> dict[str, Any]:
    """A whole SCRAM login: the last SaslAuthenticate answer."""
    assert session.handshake(mechanism)["error_code"] == 0
    client = ScramClient(mechanism, user, password)
    first, close = await session.authenticate(client.first())
    if first["error_code"]:
        return first
    assert not close
    final, close = await session.authenticate(client.final(first["auth_bytes"]))
    if final["error_code"] == 0:
        client.verify(final["auth_bytes"])
        assert not close
    else:
        assert close
    return final


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_login_gives_the_principal_and_a_session_within_the_token(mechanism: str) -> None:
    clock = Clock()
    session = server(clock).session("127.0.0.1")
    assert session.admits(API_VERSIONS.key) and not session.admits(METADATA.key)
    answer = asyncio.run(scram(session, mechanism, "alice", "alice-pw"))
    assert answer["error_code"] == 0
    # The session ends a tenth of the token's lifetime early (at most 30 s).
    assert answer["session_lifetime_ms"] == LIFETIME_S * 900
    assert session.login is not None and session.login.principal == "User:alice"
    verifier = TokenVerifier(SECRET, clock=clock)
    assert verifier.principal(session.login.token) == "User:alice"
    assert session.admits(METADATA.key) and session.admits(PRODUCE.key)


@pytest.mark.parametrize(
    ("user", "password"), [("alice", "wrong"), ("nobody", "alice-pw"), ("bob", "bob-pw")]
)
def test_wrong_password_and_unknown_user_fail_alike(user: str, password: str) -> None:
    """bob has no SCRAM-SHA-256 credential: the same failure as an unknown user."""
    session = server(Clock()).session("127.0.0.1")
    answer = asyncio.run(scram(session, "SCRAM-SHA-256", user, password))
    assert answer["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert answer["error_message"] == "authentication failed: invalid credentials"
    assert session.login is None and not session.admits(METADATA.key)


def test_plain_is_checked_against_the_stored_scram_credential() -> None:
    sasl = server(Clock())

    async def plain(session: SaslSession, payload: bytes) -> tuple[dict[str, Any], bool]:
        assert session.handshake("PLAIN")["error_code"] == 0
        return await session.authenticate(payload)

    good = sasl.session("127.0.0.1")
    answer, close = asyncio.run(plain(good, b"\0bob\0bob-pw"))  # bob: SCRAM-SHA-512 only
    assert (answer["error_code"], close) == (0, False)
    assert good.login is not None and good.login.principal == "User:bob"
    for payload in (b"\0bob\0wrong", b"\0nobody\0x", b"alice\0bob\0bob-pw", b"bob-pw"):
        answer, close = asyncio.run(plain(sasl.session("127.0.0.1"), payload))
        assert (answer["error_code"], close) == (ErrorCode.SASL_AUTHENTICATION_FAILED, True)


def test_plain_is_not_offered_without_tls_and_unknown_mechanisms_are_refused() -> None:
    session = server(Clock(), plain=False).session("127.0.0.1")
    answer = session.handshake("PLAIN")
    assert answer["error_code"] == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert answer["mechanisms"] == ["SCRAM-SHA-256", "SCRAM-SHA-512"]
    assert session.handshake("GSSAPI")["error_code"] == ErrorCode.UNSUPPORTED_SASL_MECHANISM


def test_authenticate_before_a_handshake_is_an_illegal_state() -> None:
    session = server(Clock()).session("127.0.0.1")
    answer, close = asyncio.run(session.authenticate(b"n,,n=alice,r=abc"))
    assert (answer["error_code"], close) == (ErrorCode.ILLEGAL_SASL_STATE, True)
    assert session.admits(SASL_AUTHENTICATE.key)


def test_the_session_ends_with_the_token_unless_renewed() -> None:
    clock = Clock()
    session = server(clock).session("127.0.0.1")
    asyncio.run(scram(session, "SCRAM-SHA-256", "alice", "alice-pw"))
    first = session.login
    assert first is not None
    clock.now += LIFETIME_S * 0.85
    assert session.admits(METADATA.key)
    # KIP-368: the same principal logs in again on the same connection before the end.
    answer = asyncio.run(scram(session, "SCRAM-SHA-256", "alice", "alice-pw"))
    assert answer["error_code"] == 0
    assert session.login is not None and session.login.expires_at > first.expires_at
    clock.now = first.expires_at + 1
    assert session.admits(METADATA.key)
    clock.now = session.login.expires_at
    assert session.expired() and not session.admits(METADATA.key)
    assert session.admits(API_VERSIONS.key)


def test_re_authentication_keeps_the_principal_and_the_mechanism() -> None:
    session = server(Clock()).session("127.0.0.1")
    asyncio.run(scram(session, "SCRAM-SHA-512", "alice", "alice-pw"))
    assert session.handshake("SCRAM-SHA-256")["error_code"] == ErrorCode.ILLEGAL_SASL_STATE
    answer = asyncio.run(scram(session, "SCRAM-SHA-512", "bob", "bob-pw"))
    assert answer["error_code"] == ErrorCode.ILLEGAL_SASL_STATE
    assert session.login is not None and session.login.principal == "User:alice"


def test_the_session_margin_is_a_tenth_of_the_lifetime_up_to_30_s() -> None:
    assert session_margin_s(60.0) == 6.0
    assert session_margin_s(900.0) == 30.0

"""The server side of logging in: a token for the right password, the same refusal for a wrong
password and an unknown user, and failed logins throttled per user after a few."""

from __future__ import annotations

import asyncio

import pytest

from strom.errors import IllegalSaslStateError, SaslAuthenticationFailedError
from strom.security.scram import ScramClient, ScramCredential, make_credential, salted_password
from strom_server.security.authentication import FREE_FAILURES, MAX_DELAY_S, ScramAuthenticator
from strom_server.security.tokens import TokenIssuer, TokenVerifier

SECRET = b"k" * 32
MECHANISM = "SCRAM-SHA-256"


def credential(password: str) -> ScramCredential:
    salt = b"salt-salt-salt!!"
    return make_credential(MECHANISM, salted_password(MECHANISM, password, salt, 4096), salt, 4096)


USERS = {"alice": [credential("right")]}


async def lookup(user: str) -> list[ScramCredential]:
    return USERS.get(user, [])


async def login(auth: ScramAuthenticator, user: str, password: str) -> str:
    client = ScramClient(MECHANISM, user, password)
    session, server_first = await auth.first(MECHANISM, client.first(), "10.0.0.1")
    result = await auth.final(session, client.final(server_first), "10.0.0.1")
    client.verify(result.server_final)
    return result.token


def test_logins_and_throttling() -> None:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    auth = ScramAuthenticator(lookup, TokenIssuer(SECRET, 60), sleep=sleep)

    async def scenario() -> None:
        token = await login(auth, "alice", "right")
        assert TokenVerifier(SECRET).principal(token) == "User:alice"
        for user, password in (("alice", "wrong"), ("nobody", "right")):
            with pytest.raises(SaslAuthenticationFailedError, match="invalid credentials"):
                await login(auth, user, password)
        with pytest.raises(IllegalSaslStateError):
            await auth.final("no-such-session", b"c=biws,r=x,p=eA==", "10.0.0.1")
        waits.clear()
        for _ in range(FREE_FAILURES + 6):
            with pytest.raises(SaslAuthenticationFailedError):
                await login(auth, "alice", "wrong")
        assert waits, "repeated failures are throttled"
        assert waits == sorted(waits) and waits[-1] == MAX_DELAY_S
        waits.clear()
        await login(auth, "alice", "right")  # still throttled once, then the count resets
        await login(auth, "alice", "right")
        assert len(waits) <= 2

    asyncio.run(scenario())

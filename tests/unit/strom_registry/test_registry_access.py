"""The registry's access rules (strom_registry.access) and Basic passwords checked against
SCRAM credentials (strom_server.security.passwords)."""

from __future__ import annotations

import asyncio
import base64
import secrets

import pytest

from strom.errors import SaslAuthenticationFailedError
from strom.security.acl import AclBinding, Operation
from strom.security.scram import ScramCredential, make_credential, salted_password
from strom_registry.access import ANONYMOUS, Access, subject_topic
from strom_registry.errors import RegistryError
from strom_server.security.authentication import FREE_FAILURES
from strom_server.security.authorizer import Authorizer
from strom_server.security.passwords import PasswordChecker


def _credential(password: str, mechanism: str = "SCRAM-SHA-256") -> ScramCredential:
    salt = secrets.token_bytes(16)
    return make_credential(mechanism, salted_password(mechanism, password, salt, 4096), salt, 4096)


class Users:
    """A credential lookup over a dict, counting lookups."""

    def __init__(self, **passwords: str) -> None:
        self.stored = {user: [_credential(p)] for user, p in passwords.items()}
        self.lookups = 0

    async def __call__(self, user: str) -> list[ScramCredential]:
        self.lookups += 1
        return self.stored.get(user, [])


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def test_subjects_belong_to_topics() -> None:
    assert subject_topic("orders-value") == "orders"
    assert subject_topic("orders-key") == "orders"
    assert subject_topic("com.example.Order") == "com.example.Order"
    assert subject_topic("-value") == "-value"
    assert subject_topic("a-b-value") == "a-b"


def test_passwords_checked_cached_and_throttled() -> None:
    users = Users(alice="s3cret")
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    checker = PasswordChecker(users, sleep=sleep)

    async def scenario() -> None:
        assert await checker.check("alice", "s3cret") == "User:alice"
        assert await checker.check("alice", "s3cret") == "User:alice"
        assert users.lookups == 1  # the second time from the cache
        for user, password in [("alice", "wrong"), ("bob", "s3cret")] + [("alice", "x")] * (
            FREE_FAILURES
        ):
            with pytest.raises(SaslAuthenticationFailedError, match="invalid credentials"):
                await checker.check(user, password)
        assert waits  # alice's failures in a row beyond the free ones wait first
        assert await checker.check("alice", "s3cret") == "User:alice"  # still cached

    asyncio.run(scenario())


def test_authentication_and_authorization() -> None:
    authorizer = Authorizer(
        [AclBinding.create("TOPIC", "orders", "User:alice", "WRITE")], super_users=["User:admin"]
    )
    access = Access(PasswordChecker(Users(alice="pw", admin="root")), authorizer)

    async def principal(header: str | None) -> str:
        return await access.principal(header, "127.0.0.1")

    for header in (None, "Bearer x", "Basic !!!", _basic("alice", "no"), _basic("", "pw")):
        with pytest.raises(RegistryError) as refused:
            asyncio.run(principal(header))
        assert (refused.value.status, refused.value.error_code) == (401, 401)
    alice = asyncio.run(principal(_basic("alice", "pw")))
    assert alice == "User:alice"
    assert access.may(alice, "h", Operation.WRITE, "orders-value")
    assert access.may(alice, "h", Operation.DESCRIBE, "orders-key")  # WRITE implies DESCRIBE
    assert not access.may(alice, "h", Operation.DELETE, "orders-value")
    assert not access.may(alice, "h", Operation.DESCRIBE, "payroll-value")
    assert not access.may(alice, "h", Operation.ALTER_CONFIGS, None)  # the global settings
    assert access.visible(alice, "h", ["payroll-value", "orders-value"]) == ["orders-value"]
    with pytest.raises(RegistryError) as forbidden:
        access.check(alice, "h", Operation.WRITE, "payroll-value", "POST /subjects")
    assert (forbidden.value.status, forbidden.value.error_code) == (403, 40301)
    assert "payroll-value" in forbidden.value.message
    admin = asyncio.run(principal(_basic("admin", "root")))
    assert access.may(admin, "h", Operation.ALTER_CONFIGS, None)


def test_open_access_asks_nothing() -> None:
    access = Access()
    assert access.open
    assert asyncio.run(access.principal(None, "h")) == ANONYMOUS
    assert access.may(ANONYMOUS, "h", Operation.DELETE, "anything")

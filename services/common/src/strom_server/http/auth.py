"""Who is calling an HTTP service: one credential check, used by HTTP Basic (the schema
registry) and by the console's login form alike.

A ``CredentialCheck`` turns a user name and password into a principal (``User:<name>``) or
raises ``SaslAuthenticationFailedError``; ``strom_server.security.passwords.PasswordChecker``
checks Strom's users (their SCRAM credentials in etcd), ``OneUser`` the one user a console is
started with (``--user``, ``--password-file``). ``BasicAuth`` reads the ``Authorization``
header and asks its check; every refusal is ``Unauthenticated`` (HTTP 401, with the
``WWW-Authenticate`` challenge).
"""

from __future__ import annotations

import base64
import binascii
import hmac
from typing import Protocol

from strom.errors import SaslAuthenticationFailedError

__all__ = [
    "ANONYMOUS",
    "BasicAuth",
    "CredentialCheck",
    "OneUser",
    "Unauthenticated",
    "basic_challenge",
    "basic_credentials",
    "password_ok",
]

#: The principal of a caller when no authentication is asked for.
ANONYMOUS = "User:ANONYMOUS"


def basic_challenge(realm: str) -> str:
    """The ``WWW-Authenticate`` header asking for HTTP Basic credentials of ``realm``."""
    return f'Basic realm="{realm}"'


class Unauthenticated(Exception):
    """No valid credentials (HTTP 401); ``challenge`` is the ``WWW-Authenticate`` header."""

    status = 401

    def __init__(self, message: str, realm: str = "strom") -> None:
        super().__init__(message)
        self.message = message
        self.challenge = basic_challenge(realm)


class CredentialCheck(Protocol):
    async def check(self, user: str, password: str, host: str = "") -> str:
        """The principal of ``user`` when ``password`` is theirs, else
        ``SaslAuthenticationFailedError``."""
        ...


def password_ok(expected_user: str, expected_password: str, user: str, password: str) -> bool:
    """Both compared in constant time."""
    user_ok = hmac.compare_digest(expected_user.encode(), user.encode())
    password_ok_ = hmac.compare_digest(expected_password.encode(), password.encode())
    return user_ok and password_ok_


class OneUser:
    """One user with one password, both compared in constant time."""

    def __init__(self, user: str, password: str) -> None:
        self.user = user
        self._password = password

    async def check(self, user: str, password: str, host: str = "") -> str:
        if not password_ok(self.user, self._password, user, password):
            raise SaslAuthenticationFailedError("authentication failed: invalid credentials")
        return f"User:{self.user}"


def basic_credentials(header: str | None, realm: str = "strom") -> tuple[str, str]:
    """(user, password) of an HTTP Basic ``Authorization`` header; ``Unauthenticated`` for a
    missing or malformed one."""
    if not header or not header[:6].lower() == "basic ":
        raise Unauthenticated("Unauthorized: HTTP Basic credentials are required", realm)
    try:
        user, sep, password = (
            base64.b64decode(header[6:].strip(), validate=True).decode().partition(":")
        )
    except (binascii.Error, UnicodeDecodeError):
        raise Unauthenticated("Unauthorized: malformed Basic credentials", realm) from None
    if not sep or not user:
        raise Unauthenticated("Unauthorized: malformed Basic credentials", realm)
    return user, password


class BasicAuth:
    """HTTP Basic against ``check`` (None: nobody is asked, every caller is ``ANONYMOUS``)."""

    def __init__(self, check: CredentialCheck | None, realm: str = "strom") -> None:
        self.check = check
        self.realm = realm

    async def principal(self, authorization: str | None, host: str) -> str:
        """The caller's principal from its ``Authorization`` header (``Unauthenticated`` when
        one is required and it is missing or wrong)."""
        if self.check is None:
            return ANONYMOUS
        user, password = basic_credentials(authorization, self.realm)
        try:
            return await self.check.check(user, password, host)
        except SaslAuthenticationFailedError:
            raise Unauthenticated("Unauthorized: invalid credentials", self.realm) from None

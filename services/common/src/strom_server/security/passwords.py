"""Checking a user's password against the SCRAM credential stored for it: for HTTP services
that take Basic authentication (the schema registry) against Strom's users.

``PasswordChecker.check(user, password, host)`` returns the principal (``User:<name>``) or
raises ``SaslAuthenticationFailedError``. The password is salted with the stored salt and
iteration count and its StoredKey compared (RFC 5802), for any of the user's mechanisms. A
success is remembered for ``cache_s`` (a keyed digest of the password, never the password),
so repeated requests cost one dict lookup rather than a PBKDF2 run; a user deleted or given a
new password is therefore refused at the latest ``cache_s`` later. Failures are throttled as
the gateway's SCRAM logins are (``strom_server.security.authentication``) and audited.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets
import time
from collections.abc import Awaitable, Callable

from strom.errors import SaslAuthenticationFailedError
from strom.security.scram import ScramCredential, hash_name, salted_password
from strom_server.security.authentication import CredentialLookup, LoginThrottle

__all__ = ["PasswordChecker"]

_CACHE_LIMIT = 10_000


def _matches(credential: ScramCredential, password: str) -> bool:
    algorithm = hash_name(credential.mechanism)
    salted = salted_password(credential.mechanism, password, credential.salt, credential.iterations)
    client_key = hmac.digest(salted, b"Client Key", algorithm)
    return hmac.compare_digest(hashlib.new(algorithm, client_key).digest(), credential.stored_key)


class PasswordChecker:
    """Users' passwords checked against their stored SCRAM credentials (module docstring)."""

    def __init__(
        self,
        credentials: CredentialLookup,
        *,
        cache_s: float = 30.0,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._credentials = credentials
        self._cache_s = cache_s
        self._throttle = LoginThrottle(sleep)
        self._key = secrets.token_bytes(32)
        self._verified: dict[tuple[str, bytes], float] = {}

    async def check(self, user: str, password: str, host: str = "") -> str:
        """The principal of ``user`` when ``password`` is theirs; else
        ``SaslAuthenticationFailedError`` (an unknown user and a wrong password alike)."""
        digest = hmac.digest(self._key, f"{user}\0{password}".encode(), "sha256")
        now = time.monotonic()
        if self._verified.get((user, digest), 0.0) > now:
            return f"User:{user}"
        await self._throttle.wait(user)
        stored = await self._credentials(user) if user else []
        # PBKDF2 takes milliseconds: off the event loop.
        ok = any([await asyncio.to_thread(_matches, c, password) for c in stored])
        if not ok:
            self._throttle.failed(user, host, "wrong password or unknown user (basic auth)")
            raise SaslAuthenticationFailedError("authentication failed: invalid credentials")
        self._throttle.succeeded(user)
        if len(self._verified) >= _CACHE_LIMIT:
            self._verified = {k: t for k, t in self._verified.items() if t > now}
            if len(self._verified) >= _CACHE_LIMIT:
                self._verified.clear()
        self._verified[(user, digest)] = now + self._cache_s
        return f"User:{user}"

"""Login tokens: short-lived, signed with the cluster secret, checked locally by every service.

A token is ``v1.<payload>.<mac>``: the payload is base64url JSON ``{"p": principal, "iat":
issued, "exp": expires}`` (seconds since the epoch), the mac base64url HMAC-SHA-256 of
``v1.<payload>`` under the cluster secret (``P/security/token-secret`` in etcd). Verifying is
one HMAC; a verified token is cached until it expires, so a call costs a dict lookup.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Callable

from strom.errors import SaslAuthenticationFailedError

__all__ = ["TokenIssuer", "TokenVerifier", "new_secret"]

_PREFIX = "v1."
_CACHE_LIMIT = 10_000


def new_secret() -> bytes:
    """32 random bytes: a fresh cluster secret."""
    return secrets.token_bytes(32)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _mac(secret: bytes, signed: str) -> str:
    return _b64(hmac.digest(secret, signed.encode(), hashlib.sha256))


class TokenIssuer:
    """Signs tokens for principals, valid ``lifetime_s`` seconds."""

    def __init__(
        self, secret: bytes, lifetime_s: float, clock: Callable[[], float] = time.time
    ) -> None:
        self._secret = secret
        self.lifetime_s = lifetime_s
        self.clock = clock

    def issue(self, principal: str) -> str:
        now = self.clock()
        payload = json.dumps(
            {"p": principal, "iat": int(now), "exp": now + self.lifetime_s},
            separators=(",", ":"),
        )
        signed = _PREFIX + _b64(payload.encode())
        return f"{signed}.{_mac(self._secret, signed)}"


class TokenVerifier:
    """Checks tokens: the principal of a valid one, SaslAuthenticationFailedError otherwise."""

    def __init__(self, secret: bytes, clock: Callable[[], float] = time.time) -> None:
        self._secret = secret
        self.clock = clock
        self._verified: dict[str, tuple[str, float]] = {}

    def principal(self, token: str) -> str:
        return self.verify(token)[0]

    def verify(self, token: str) -> tuple[str, float]:
        """The principal of a valid token and when it expires (seconds since the epoch, on
        ``clock``)."""
        now = self.clock()
        cached = self._verified.get(token)
        if cached is not None:
            if now < cached[1]:
                return cached
            del self._verified[token]
            raise SaslAuthenticationFailedError("the token has expired; log in again")
        signed, sep, mac = token.rpartition(".")
        if not sep or not signed.startswith(_PREFIX):
            raise SaslAuthenticationFailedError("malformed token")
        if not hmac.compare_digest(mac, _mac(self._secret, signed)):
            raise SaslAuthenticationFailedError("invalid token signature")
        try:
            payload = json.loads(_unb64(signed[len(_PREFIX) :]))
            principal, expires = str(payload["p"]), float(payload["exp"])
        except (ValueError, KeyError, TypeError):
            raise SaslAuthenticationFailedError("malformed token") from None
        if now >= expires:
            raise SaslAuthenticationFailedError("the token has expired; log in again")
        if len(self._verified) >= _CACHE_LIMIT:
            self._verified.clear()
        self._verified[token] = (principal, expires)
        return principal, expires

"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, as Kafka uses them): both sides' arithmetic.

The client side (``ScramClient``) builds client-first and client-final messages and checks the
server's signature; the server side keeps per user only ``ScramCredential`` (salt, iterations,
StoredKey, ServerKey: never the password) and checks a client's proof with
``ScramServerExchange``. Plain functions and values: the transport (a gRPC exchange on the
gateway) is elsewhere.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import Any

from strom.errors import (
    ConfigurationError,
    IllegalSaslStateError,
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
)

__all__ = [
    "DEFAULT_ITERATIONS",
    "MECHANISMS",
    "MIN_ITERATIONS",
    "ScramClient",
    "ScramCredential",
    "ScramServerExchange",
    "hash_name",
    "make_credential",
    "salted_password",
]

#: Mechanism name -> hashlib name.
MECHANISMS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MIN_ITERATIONS = 4096
DEFAULT_ITERATIONS = 8192


def hash_name(mechanism: str) -> str:
    """hashlib's name for ``mechanism``; UnsupportedSaslMechanismError for another one."""
    name = MECHANISMS.get(mechanism.upper())
    if name is None:
        raise UnsupportedSaslMechanismError(
            f"unsupported SASL mechanism {mechanism!r}; use one of {', '.join(MECHANISMS)}"
        )
    return name


def _hmac(algorithm: str, key: bytes, data: bytes) -> bytes:
    return hmac.digest(key, data, algorithm)


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, iterations): PBKDF2-HMAC with the mechanism's hash."""
    if iterations < MIN_ITERATIONS:
        raise ConfigurationError(f"SCRAM iterations must be >= {MIN_ITERATIONS}, got {iterations}")
    return hashlib.pbkdf2_hmac(hash_name(mechanism), password.encode(), salt, iterations)


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What the server stores for one user and mechanism."""

    mechanism: str
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes

    def to_dict(self) -> dict[str, Any]:
        return {
            "mechanism": self.mechanism,
            "salt": base64.b64encode(self.salt).decode(),
            "iterations": self.iterations,
            "stored_key": base64.b64encode(self.stored_key).decode(),
            "server_key": base64.b64encode(self.server_key).decode(),
        }

    @classmethod
    def from_dict(cls, value: dict[str, Any]) -> ScramCredential:
        return cls(
            value["mechanism"],
            base64.b64decode(value["salt"]),
            int(value["iterations"]),
            base64.b64decode(value["stored_key"]),
            base64.b64decode(value["server_key"]),
        )


def make_credential(mechanism: str, salted: bytes, salt: bytes, iterations: int) -> ScramCredential:
    """The stored credential for a salted password."""
    algorithm = hash_name(mechanism)
    if iterations < MIN_ITERATIONS:
        raise ConfigurationError(f"SCRAM iterations must be >= {MIN_ITERATIONS}, got {iterations}")
    client_key = _hmac(algorithm, salted, b"Client Key")
    return ScramCredential(
        mechanism.upper(),
        salt,
        iterations,
        hashlib.new(algorithm, client_key).digest(),
        _hmac(algorithm, salted, b"Server Key"),
    )


def _escape(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def _unescape(name: str) -> str:
    return name.replace("=2C", ",").replace("=3D", "=")


def _attributes(message: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if sep and len(key) == 1:
            found.setdefault(key, value)
    return found


_GS2_HEADER = "n,,"


class ScramClient:
    """One client-side exchange: ``first()``, ``final(server_first)``, ``verify(server_final)``."""

    def __init__(self, mechanism: str, username: str, password: str) -> None:
        self.mechanism = mechanism.upper()
        self._algorithm = hash_name(self.mechanism)
        self._username = username
        self._password = password
        self._nonce = secrets.token_urlsafe(24)
        self._first_bare = f"n={_escape(username)},r={self._nonce}"
        self._server_signature: bytes | None = None

    def first(self) -> bytes:
        return (_GS2_HEADER + self._first_bare).encode()

    def final(self, server_first: bytes) -> bytes:
        text = server_first.decode()
        attrs = _attributes(text)
        nonce, salt, iterations = attrs.get("r", ""), attrs.get("s"), attrs.get("i", "")
        if not nonce.startswith(self._nonce) or salt is None or not iterations.isdigit():
            raise SaslAuthenticationFailedError("malformed SCRAM server-first-message")
        count = int(iterations)
        if count < MIN_ITERATIONS:
            raise SaslAuthenticationFailedError(f"the server asked for only {count} iterations")
        salted = salted_password(self.mechanism, self._password, base64.b64decode(salt), count)
        channel = base64.b64encode(_GS2_HEADER.encode()).decode()
        without_proof = f"c={channel},r={nonce}"
        auth_message = f"{self._first_bare},{text},{without_proof}".encode()
        client_key = _hmac(self._algorithm, salted, b"Client Key")
        stored_key = hashlib.new(self._algorithm, client_key).digest()
        signature = _hmac(self._algorithm, stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = _hmac(self._algorithm, salted, b"Server Key")
        self._server_signature = _hmac(self._algorithm, server_key, auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        """SaslAuthenticationFailedError unless the server proved it knows the credential."""
        attrs = _attributes(server_final.decode())
        if "e" in attrs:
            raise SaslAuthenticationFailedError(f"SCRAM: {attrs['e']}")
        expected = self._server_signature
        if expected is None or not hmac.compare_digest(
            base64.b64decode(attrs.get("v", "")), expected
        ):
            raise SaslAuthenticationFailedError("the server's SCRAM signature does not match")


class ScramServerExchange:
    """One server-side exchange: ``parse_first`` (the user name), ``server_first(credential)``,
    then ``verify_final(client_final)`` returning server-final-message.

    A user that does not exist still gets a server-first-message (from a made-up credential),
    so the answer does not tell an unknown user from a wrong password.
    """

    def __init__(self, mechanism: str) -> None:
        self.mechanism = mechanism.upper()
        self._algorithm = hash_name(self.mechanism)
        self.username = ""
        self._client_nonce = ""
        self._first_bare = ""
        self._server_first = ""
        self._credential: ScramCredential | None = None

    def parse_first(self, client_first: bytes) -> str:
        text = client_first.decode(errors="replace")
        if not text.startswith(_GS2_HEADER):
            raise IllegalSaslStateError("SCRAM client-first-message must start with 'n,,'")
        self._first_bare = text[len(_GS2_HEADER) :]
        attrs = _attributes(self._first_bare)
        if not attrs.get("n") or not attrs.get("r"):
            raise IllegalSaslStateError("SCRAM client-first-message lacks n= or r=")
        self.username = _unescape(attrs["n"])
        self._client_nonce = attrs["r"]
        return self.username

    def server_first(self, credential: ScramCredential | None) -> bytes:
        if credential is None or credential.mechanism != self.mechanism:
            # Unknown user: answer like for a known one; the proof can never match.
            credential = ScramCredential(
                self.mechanism, secrets.token_bytes(16), DEFAULT_ITERATIONS, b"", b""
            )
        self._credential = credential
        nonce = self._client_nonce + secrets.token_urlsafe(24)
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={nonce},s={salt},i={credential.iterations}"
        return self._server_first.encode()

    def verify_final(self, client_final: bytes) -> bytes:
        """server-final-message; SaslAuthenticationFailedError when the proof is wrong."""
        credential = self._credential
        if credential is None:
            raise IllegalSaslStateError("SCRAM client-final-message before server-first")
        text = client_final.decode(errors="replace")
        without_proof, sep, proof_part = text.rpartition(",p=")
        attrs = _attributes(without_proof)
        expected_nonce = _attributes(self._server_first).get("r")
        if not sep or attrs.get("r") != expected_nonce or not credential.stored_key:
            raise SaslAuthenticationFailedError("authentication failed")
        auth_message = f"{self._first_bare},{self._server_first},{without_proof}".encode()
        try:
            proof = base64.b64decode(proof_part, validate=True)
        except ValueError:
            raise SaslAuthenticationFailedError("authentication failed") from None
        signature = _hmac(self._algorithm, credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise SaslAuthenticationFailedError("authentication failed")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(
            hashlib.new(self._algorithm, client_key).digest(), credential.stored_key
        ):
            raise SaslAuthenticationFailedError("authentication failed")
        server_signature = _hmac(self._algorithm, credential.server_key, auth_message)
        return f"v={base64.b64encode(server_signature).decode()}".encode()

"""SCRAM both ways (RFC 5802 arithmetic, unknown users, wrong passwords) and login tokens
(valid, expired, forged)."""

from __future__ import annotations

import base64

import pytest

from strom.errors import ConfigurationError, SaslAuthenticationFailedError
from strom.security.scram import (
    ScramClient,
    ScramServerExchange,
    make_credential,
    salted_password,
)
from strom_server.security.tokens import TokenIssuer, TokenVerifier


def _exchange(
    mechanism: str, stored_password: str, given_password: str, known: bool = True
) -> None:
    salt = b"0123456789abcdef"
    credential = make_credential(
        mechanism, salted_password(mechanism, stored_password, salt, 4096), salt, 4096
    )
    client = ScramClient(mechanism, "al,ice=", given_password)
    server = ScramServerExchange(mechanism)
    assert server.parse_first(client.first()) == "al,ice="
    final = client.final(server.server_first(credential if known else None))
    client.verify(server.verify_final(final))


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_round_trip(mechanism: str) -> None:
    _exchange(mechanism, "s3cret", "s3cret")
    with pytest.raises(SaslAuthenticationFailedError):
        _exchange(mechanism, "s3cret", "guess")
    with pytest.raises(SaslAuthenticationFailedError):
        _exchange(mechanism, "s3cret", "s3cret", known=False)


def test_scram_refuses_few_iterations() -> None:
    with pytest.raises(ConfigurationError, match="4096"):
        salted_password("SCRAM-SHA-256", "p", b"salt", 1000)


def test_tokens() -> None:
    now = [1000.0]
    issuer = TokenIssuer(b"k" * 32, 60, clock=lambda: now[0])
    verifier = TokenVerifier(b"k" * 32, clock=lambda: now[0])
    token = issuer.issue("User:alice")
    assert verifier.principal(token) == "User:alice"
    forged = TokenVerifier(b"x" * 32, clock=lambda: now[0])
    with pytest.raises(SaslAuthenticationFailedError, match="signature"):
        forged.principal(token)
    with pytest.raises(SaslAuthenticationFailedError, match="malformed"):
        verifier.principal("garbage")
    now[0] += 61
    with pytest.raises(SaslAuthenticationFailedError, match="expired"):
        verifier.principal(token)


def test_rfc7677_test_vector() -> None:
    """SCRAM-SHA-256's example exchange in RFC 7677, section 3, both sides."""
    client_first = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    server_first = (
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    )
    client_final = (
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    server_final = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    client = ScramClient("SCRAM-SHA-256", "user", "pencil")
    client._nonce = "rOprNGfwEbeRWgbNEkqO"  # the RFC's nonce instead of a random one
    client._first_bare = client_first.decode()[3:]
    assert client.first() == client_first
    assert client.final(server_first) == client_final
    client.verify(server_final)

    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    stored = make_credential(
        "SCRAM-SHA-256", salted_password("SCRAM-SHA-256", "pencil", salt, 4096), salt, 4096
    )
    server = ScramServerExchange("SCRAM-SHA-256")
    assert server.parse_first(client_first) == "user"
    server.server_first(stored)
    server._server_first = server_first.decode()  # the RFC's server nonce
    assert server.verify_final(client_final) == server_final

"""SCRAM both ways (RFC 5802 arithmetic, unknown users, wrong passwords) and login tokens
(valid, expired, forged)."""

from __future__ import annotations

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

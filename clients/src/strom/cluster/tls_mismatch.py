"""Telling a TLS mismatch from a network failure, for ``from_rpc_error``.

gRPC reports both directions of a mismatch as a retriable ``UNAVAILABLE``:

- a TLS client dialing a plaintext port fails its handshake with OpenSSL's
  ``WRONG_VERSION_NUMBER`` (the server answered with bytes that are not TLS);
- a certificate the client does not trust fails it with ``CERTIFICATE_VERIFY_FAILED``;
- a plaintext client dialing a TLS port sees only ``Socket closed`` before the connection is
  up, which a server going away looks like too. So that case is confirmed by one TLS
  handshake with the peer (certificate not checked, at most ``PROBE_TIMEOUT_S``): a peer that
  completes it requires TLS. The answer is remembered per peer for ``PROBE_CACHE_S``. A TLS
  client refused for its client certificate (``ssl.client.auth=required``) sees the same
  ``Socket closed``, so the message names that cause too.

``diagnose`` returns the non-retriable ``SslHandshakeFailedError`` naming the server and the
likely fix, or None when the failure is something else.
"""

from __future__ import annotations

import re
import socket
import ssl
import time

from strom.errors import SslHandshakeFailedError

__all__ = ["PROBE_CACHE_S", "PROBE_TIMEOUT_S", "diagnose", "speaks_tls"]

PROBE_TIMEOUT_S = 1.0
PROBE_CACHE_S = 10.0
_CONNECTING = "failed to connect to all addresses"
# gRPC names the peer it failed on: "ipv4:127.0.0.1:9092: Socket closed".
_PEER = re.compile(r"(?:ipv4:|ipv6:\[?)([^\s\]]+?)\]?:(\d+):")
_probed: dict[tuple[str, int], tuple[bool, float]] = {}


def _peer(details: str, target: str) -> tuple[str, int] | None:
    found = _PEER.search(details)
    if found:
        return found.group(1), int(found.group(2))
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


def speaks_tls(host: str, port: int, timeout_s: float = PROBE_TIMEOUT_S) -> bool:
    """Whether the server at host:port speaks TLS: it completes a handshake (its certificate
    unchecked: only the protocol matters here) or answers with a TLS alert."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.set_alpn_protocols(["h2"])
    try:
        with (
            socket.create_connection((host, port), timeout=timeout_s) as raw,
            context.wrap_socket(raw, server_hostname=host),
        ):
            return True
    except ssl.SSLError as exc:  # a TLS alert (a client certificate required, ...) is TLS
        return "ALERT" in str(exc.reason or "").upper()
    except OSError:
        return False


def _requires_tls(peer: tuple[str, int]) -> bool:
    now = time.monotonic()
    cached = _probed.get(peer)
    if cached is not None and cached[1] > now:
        return cached[0]
    answer = speaks_tls(*peer)
    if len(_probed) > 1000:
        _probed.clear()
    _probed[peer] = (answer, now + PROBE_CACHE_S)
    return answer


def diagnose(details: str, target: str = "") -> SslHandshakeFailedError | None:
    """The mismatch behind an ``UNAVAILABLE`` with these details, if it is one."""
    peer = _peer(details, target)
    where = f"{peer[0]}:{peer[1]}" if peer else target or "the server"
    upper, lower = details.upper(), details.lower()
    if "WRONG_VERSION_NUMBER" in upper or "WRONG VERSION NUMBER" in upper:
        return SslHandshakeFailedError(
            f"the server at {where} does not speak TLS (a plaintext port?): set "
            f"security_protocol=PLAINTEXT or SASL_PLAINTEXT, or use the server's TLS port "
            f"({details})"
        )
    if "CERTIFICATE_VERIFY_FAILED" in upper:
        return SslHandshakeFailedError(
            f"the certificate of the server at {where} is not trusted: set ssl_cafile to the "
            f"CA that signed it ({details})"
        )
    # "Handshake read failed (Socket closed)": a TLS client whose server went away.
    closed = _CONNECTING in details and "Socket closed" in details and "handshake" not in lower
    if closed and peer is not None and _requires_tls(peer):
        return SslHandshakeFailedError(
            f"the server at {where} requires TLS: set security_protocol=SSL or SASL_SSL "
            f"(and ssl_cafile); if TLS is already on, it wants a client certificate signed by "
            f"a CA it trusts (ssl_certfile, ssl_keyfile) ({details})"
        )
    return None

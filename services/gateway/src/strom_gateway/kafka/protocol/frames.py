"""Kafka's framing: a request is an int32 size then the header and body; so is a response.

``parse_request`` reads the header of one frame and, when Strom serves the API at that
version, its body. Anything it cannot serve becomes an ``Unsupported`` (answered with
UNSUPPORTED_VERSION); bytes that do not parse raise ``MalformedMessageError`` (the connection
is closed). ``response_frame`` builds a whole response frame, size prefix included;
``response_parts`` the same as a few parts, large record views among them as they are (the
listener writes them without joining them first).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from strom_gateway.kafka.protocol.codec import (
    MalformedMessageError,
    Reader,
    Writer,
    decode,
    encode_into,
)
from strom_gateway.kafka.protocol.messages import API_VERSIONS, by_key
from strom_gateway.kafka.protocol.schema import Api

__all__ = [
    "SPLICE_BYTES",
    "UNSUPPORTED_VERSION",
    "Request",
    "Unsupported",
    "parse_request",
    "response_frame",
    "response_parts",
    "unsupported_frame",
]

UNSUPPORTED_VERSION = 35
_SIZE = struct.Struct(">i")
_HEADER_FIXED = struct.Struct(">hhi")
#: Parts of a response at least this large are written as they are, the runs between joined.
SPLICE_BYTES = 1 << 16


@dataclass(frozen=True, slots=True)
class Request:
    """One decoded request."""

    api: Api
    version: int
    correlation_id: int
    client_id: str | None
    body: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Unsupported:
    """A request for an API or version Strom does not serve (its body is not read)."""

    api_key: int
    version: int
    correlation_id: int


def parse_request(frame: bytes | bytearray | memoryview) -> Request | Unsupported:
    """One request frame (without its size prefix)."""
    if len(frame) < _HEADER_FIXED.size:
        raise MalformedMessageError(f"a request header needs 8 bytes, the frame has {len(frame)}")
    api_key, version, correlation_id = _HEADER_FIXED.unpack_from(frame)
    api = by_key(api_key)
    if api is None or not api.supports(version):
        return Unsupported(api_key, version, correlation_id)
    flexible = api.flexible(version)
    r = Reader(frame, _HEADER_FIXED.size)
    n = r.length(False)
    client_id = None if n is None else str(r.take(n), "utf-8", "replace")
    if flexible:  # request header v2: tagged fields after the client id
        for _ in range(r.uvarint()):
            r.uvarint()
            r.take(r.uvarint())
    body = decode(api.request, version, flexible, r.buf, r.pos, exact=False)
    return Request(api, version, correlation_id, client_id, body)


def response_frame(api: Api, version: int, correlation_id: int, body: dict[str, Any]) -> bytes:
    """The whole response frame: size, header (v1 with tagged fields for flexible versions,
    except ApiVersions, whose response header is always v0), body."""
    return _response(api, version, correlation_id, body).getvalue()


def response_parts(
    api: Api, version: int, correlation_id: int, body: dict[str, Any]
) -> list[bytes | memoryview]:
    """``response_frame``'s bytes in order as a few parts: each part of ``SPLICE_BYTES`` or
    more (a Fetch's records) as it is, the small ones between them joined."""
    out: list[bytes | memoryview] = []
    run: list[bytes | memoryview] = []
    for part in _response(api, version, correlation_id, body).parts:
        if len(part) < SPLICE_BYTES:
            run.append(part)
            continue
        if run:
            out.append(b"".join(run))
            run = []
        out.append(part)
    if run:
        out.append(b"".join(run))
    return out


def _response(api: Api, version: int, correlation_id: int, body: dict[str, Any]) -> Writer:
    flexible = api.flexible(version)
    w = Writer()
    w.parts.append(b"")  # the size, filled in below
    w.fixed(_SIZE, correlation_id)
    if flexible and api.key != API_VERSIONS.key:
        w.uvarint(0)
    encode_into(w, api.response, version, flexible, body)
    w.parts[0] = _SIZE.pack(w.size())
    return w


def unsupported_frame(request: Unsupported, api_keys: list[dict[str, int]]) -> bytes:
    """The answer to an API or version Strom does not serve: for ApiVersions, a v0 response
    with UNSUPPORTED_VERSION and the APIs Strom does serve (clients then retry with a version
    from that list); for anything else, the correlation id and an int16 UNSUPPORTED_VERSION."""
    if request.api_key == API_VERSIONS.key:
        body = {"error_code": UNSUPPORTED_VERSION, "api_keys": api_keys}
        return response_frame(API_VERSIONS, 0, request.correlation_id, body)
    payload = _SIZE.pack(request.correlation_id) + struct.pack(">h", UNSUPPORTED_VERSION)
    return _SIZE.pack(len(payload)) + payload

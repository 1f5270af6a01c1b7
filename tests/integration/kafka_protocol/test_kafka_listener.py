"""The Kafka listener's framing on a real socket: requests answered in order, unsupported APIs
and versions answered UNSUPPORTED_VERSION on a connection that stays open, malformed frames
closing only their own connection (with a log line)."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import structlog
from structlog.testing import capture_logs

from strom_gateway.kafka import listener as listener_module
from strom_gateway.kafka.listener import Connection, KafkaListener, served_versions
from strom_gateway.kafka.protocol.codec import decode, encode
from strom_gateway.kafka.protocol.frames import Request
from strom_gateway.kafka.protocol.messages import API_VERSIONS, METADATA

pytestmark = pytest.mark.integration

SIZE = struct.Struct(">i")


def request_frame(api_key: int, version: int, correlation_id: int, body: bytes) -> bytes:
    header = struct.pack(">hhih", api_key, version, correlation_id, 4) + b"test"
    if version >= 3 and api_key == API_VERSIONS.key:
        header += b"\x00"  # request header v2: no tagged fields
    return SIZE.pack(len(header) + len(body)) + header + body


async def read_frame(reader: asyncio.StreamReader) -> bytes:
    size = SIZE.unpack(await reader.readexactly(4))[0]
    return await reader.readexactly(size)


async def answer(request: Request, connection: Connection) -> dict[str, Any] | None:
    if request.api.key == API_VERSIONS.key:
        return {"error_code": 0, "api_keys": served_versions()}
    if request.api.key == METADATA.key:
        # Later requests overtake earlier ones inside the listener; answers keep their order.
        topics = request.body["topics"] or []
        await asyncio.sleep(0.05 * len(topics))
        return {"brokers": [], "topics": [{"name": t["name"]} for t in topics]}
    raise AssertionError(f"unexpected {request.api.name}")


def run(scenario: Callable[[int], Awaitable[None]]) -> None:
    async def main() -> None:
        listener = KafkaListener(answer, host="127.0.0.1", port=0, max_frame_bytes=1 << 20)
        port = await listener.start()
        try:
            await asyncio.wait_for(scenario(port), 30)
        finally:
            await listener.close()

    asyncio.run(main())


def api_versions(correlation_id: int, version: int = 3) -> bytes:
    body = encode(API_VERSIONS.request, version, API_VERSIONS.flexible(version),
                  {"client_software_name": "t", "client_software_version": "1"})  # fmt: skip
    return request_frame(API_VERSIONS.key, version, correlation_id, body)


def metadata(correlation_id: int, topics: list[str]) -> bytes:
    body = encode(METADATA.request, 1, False, {"topics": [{"name": t} for t in topics]})
    return request_frame(METADATA.key, 1, correlation_id, body)


def test_pipelined_requests_are_answered_in_order() -> None:
    async def scenario(port: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(metadata(1, ["a", "b", "c"]) + metadata(2, ["d"]) + metadata(3, []))
        for expected, topics in ((1, ["a", "b", "c"]), (2, ["d"]), (3, [])):
            frame = await read_frame(reader)
            assert SIZE.unpack_from(frame)[0] == expected
            body = decode(METADATA.response, 1, False, frame[4:])
            assert [t["name"] for t in body["topics"]] == topics
        writer.close()

    run(scenario)


def test_api_versions_lists_every_api_and_its_versions() -> None:
    async def scenario(port: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(api_versions(7))
        frame = await read_frame(reader)
        assert SIZE.unpack_from(frame)[0] == 7
        # The ApiVersions response header has no tagged fields, even for a flexible version.
        body = decode(API_VERSIONS.response, 3, True, frame[4:])
        assert body["error_code"] == 0
        assert body["api_keys"] == served_versions()
        writer.close()

    run(scenario)


@pytest.mark.parametrize(
    ("api_key", "version"),
    [(9999, 0), (29, 0), (METADATA.key, 99), (METADATA.key, -1), (0, 0)],  # 0 v0: Produce
    ids=["unknown-key", "unserved-key", "too-new", "negative-version", "too-old"],
)
def test_unsupported_apis_get_unsupported_version_and_the_connection_stays(
    api_key: int, version: int
) -> None:
    async def scenario(port: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(request_frame(api_key, version, 42, b"\x01\x02\x03"))
        frame = await read_frame(reader)
        assert frame == struct.pack(">ih", 42, 35)
        writer.write(metadata(43, ["x"]))
        assert SIZE.unpack_from(await read_frame(reader))[0] == 43
        writer.close()

    run(scenario)


def test_an_unsupported_api_versions_version_gets_the_served_list() -> None:
    async def scenario(port: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(request_frame(API_VERSIONS.key, 99, 5, b""))
        frame = await read_frame(reader)
        body = decode(API_VERSIONS.response, 0, False, frame[4:])
        assert body["error_code"] == 35
        assert body["api_keys"] == served_versions()
        writer.close()

    run(scenario)


MALFORMED = {
    "negative-size": SIZE.pack(-5) + b"x" * 8,
    "oversized": SIZE.pack(1 << 30) + b"x" * 8,
    "below-a-header": SIZE.pack(3) + b"abc",
    "truncated-body": request_frame(METADATA.key, 1, 9, struct.pack(">ih", 1, 50) + b"ab"),
    "negative-array": request_frame(METADATA.key, 1, 9, struct.pack(">i", -7)),
    "client-id-too-long": SIZE.pack(10) + struct.pack(">hhih", 3, 1, 9, 300),
}


@pytest.mark.parametrize("frame", list(MALFORMED.values()), ids=list(MALFORMED))
def test_a_malformed_frame_closes_its_connection_only(
    frame: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def scenario(port: int) -> None:
        bystander_reader, bystander = await asyncio.open_connection("127.0.0.1", port)
        bystander.write(metadata(1, ["slow", "er"]))  # in flight while the other one breaks
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        with capture_logs() as logs:
            # A fresh logger: the module's may be cached with another test's configuration.
            monkeypatch.setattr(listener_module, "log", structlog.get_logger("kafka-test"))
            writer.write(frame)
            assert await reader.read() == b""  # closed by the listener, nothing answered
        assert [e["event"] for e in logs] == ["malformed kafka frame; closing the connection"]
        assert SIZE.unpack_from(await read_frame(bystander_reader))[0] == 1
        bystander.write(api_versions(2))
        assert SIZE.unpack_from(await read_frame(bystander_reader))[0] == 2
        writer.close()
        bystander.close()

    run(scenario)

"""FrameStream cuts whatever chunks the socket delivers into the frames that were sent: small
ones from its scratch buffer, large ones each received into its own; a bad size or an end
inside a frame is a FrameError naming it, after the whole frames before it. A response written
as parts is the frame, its large records as they are."""

from __future__ import annotations

import asyncio
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strom_gateway.kafka.frame_stream import FrameError, FrameStream
from strom_gateway.kafka.protocol.frames import SPLICE_BYTES, response_frame, response_parts
from strom_gateway.kafka.protocol.messages import FETCH

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FRAMES = st.lists(
    st.one_of(st.binary(min_size=8, max_size=300), st.integers(60_000, 200_000)), max_size=6
)


def _wire(frames: list[bytes]) -> bytes:
    return b"".join(struct.pack(">i", len(f)) + f for f in frames)


def _feed(stream: FrameStream, data: bytes, cuts: list[int]) -> None:
    """``data`` as the socket would hand it over: chunks no larger than each buffer offered."""
    pos, i = 0, 0
    while pos < len(data):
        buffer = stream.get_buffer(-1)
        size = min(len(buffer), len(data) - pos, cuts[i % len(cuts)] if cuts else len(data))
        buffer[:size] = data[pos : pos + size]
        stream.buffer_updated(size)
        pos += size
        i += 1


async def _taken(stream: FrameStream) -> list[bytes]:
    out = []
    while (frame := await stream.next_frame()) is not None:
        out.append(bytes(frame))
    return out


@SETTINGS
@given(frames=FRAMES, cuts=st.lists(st.integers(1, 70_000), max_size=5))
def test_chunks_become_the_frames_sent(frames: list[bytes | int], cuts: list[int]) -> None:
    sent = [f if isinstance(f, bytes) else bytes([f % 251]) * f for f in frames]

    async def run() -> list[bytes]:
        stream = FrameStream(1 << 20)
        _feed(stream, _wire(sent), cuts)
        stream.eof_received()
        return await _taken(stream)

    assert asyncio.run(run()) == sent


@pytest.mark.parametrize(
    ("tail", "problem"),
    [
        (struct.pack(">i", 7) + b"x" * 7, "frame size 7 outside 8..100000"),
        (struct.pack(">i", 100_001), "frame size 100001 outside 8..100000"),
        (b"\x00\x00", "the connection ended inside a frame size"),
        (struct.pack(">i", 20) + b"x" * 5, "the connection ended inside a 20-byte frame"),
        (struct.pack(">i", 90_000) + b"x" * 70_000, "inside a 90000-byte frame"),
    ],
)
def test_a_bad_frame_ends_the_stream_after_the_good_ones(tail: bytes, problem: str) -> None:
    good = [b"a" * 10, b"b" * 70_000]

    async def run() -> None:
        stream = FrameStream(100_000)
        _feed(stream, _wire(good) + tail, [4096])
        stream.eof_received()
        assert [bytes(await stream.next_frame() or b"") for _ in good] == good
        with pytest.raises(FrameError, match=problem):
            await stream.next_frame()

    asyncio.run(run())


@SETTINGS
@given(
    version=st.sampled_from(range(FETCH.min_version, FETCH.max_version + 1)),
    sizes=st.lists(st.sampled_from([0, 10, SPLICE_BYTES - 1, SPLICE_BYTES, 200_000]), max_size=4),
)
def test_response_parts_are_the_frame(version: int, sizes: list[int]) -> None:
    """A Fetch response written as parts is the frame, its large records parts untouched."""
    records = [memoryview(bytes([i]) * size) for i, size in enumerate(sizes)]
    partitions = [
        {"partition_index": i, "error_code": 0, "high_watermark": 5, "last_stable_offset": 5,
         "log_start_offset": 0, "aborted_transactions": None, "preferred_read_replica": -1,
         "records": r}
        for i, r in enumerate(records)
    ]  # fmt: skip
    body = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0,
            "responses": [{"topic": "t", "partitions": partitions}]}  # fmt: skip
    parts = response_parts(FETCH, version, 7, body)
    assert b"".join(parts) == response_frame(FETCH, version, 7, body)
    large = [r for r in records if len(r) >= SPLICE_BYTES]
    assert [p for p in parts if isinstance(p, memoryview)] == large

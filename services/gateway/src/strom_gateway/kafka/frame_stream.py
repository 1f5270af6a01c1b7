"""One Kafka connection's bytes as whole frames, each received once.

``asyncio.StreamReader`` copies every byte into its buffer and out again (and grows the buffer
to the frame's size first): for a Produce of a few MB that was most of the listener's cost of
reading it. ``FrameStream`` is a buffered protocol: small frames are cut from a 64 KiB scratch
buffer, and a frame larger than that is received straight into its own buffer, so its record
batches are copied by the socket read only. It also writes (``write``, ``drain``) as a
``StreamWriter`` does. Reading pauses while ``MAX_QUEUED_BYTES`` of frames wait to be taken.
"""

from __future__ import annotations

import asyncio
import struct
from collections import deque
from collections.abc import Callable
from typing import Any

__all__ = ["MAX_QUEUED_BYTES", "FrameError", "FrameStream"]

_SIZE = struct.Struct(">i")
_SCRATCH = 1 << 16
#: Frames received but not yet taken, in bytes, beyond which reading pauses.
MAX_QUEUED_BYTES = 1 << 17


class FrameError(Exception):
    """The bytes cannot be a frame (its size, or the connection ended inside one)."""


class FrameStream(asyncio.BufferedProtocol):
    """Frames of at least 8 and at most ``max_frame_bytes`` bytes (without the size prefix);
    ``opened`` is called with the stream once its connection is made."""

    def __init__(
        self, max_frame_bytes: int, opened: Callable[[FrameStream], None] | None = None
    ) -> None:
        self._max = max_frame_bytes
        self._opened = opened
        self._buf = bytearray(_SCRATCH)
        self._start = self._end = 0
        self._frame: bytearray | None = None
        self._filled = 0
        self._frames: deque[bytes | bytearray] = deque()
        self._queued = 0
        self._done = False
        self._problem: str | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._read_paused = False
        self._write_paused = False
        self._drainers: list[asyncio.Future[None]] = []
        self._lost = False
        self._closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.transport: asyncio.Transport | None = None

    # -- the transport's side ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        if self._opened is not None:
            self._opened(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._frame is not None:
            return memoryview(self._frame)[self._filled :]
        if self._start:
            left = self._end - self._start
            self._buf[:left] = self._buf[self._start : self._end]
            self._start, self._end = 0, left
        return memoryview(self._buf)[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        if self._done:
            return
        if self._frame is not None:
            self._filled += nbytes
            if self._filled == len(self._frame):
                frame, self._frame = self._frame, None
                self._deliver(frame)
            return
        self._end += nbytes
        self._cut()

    def eof_received(self) -> bool:
        self._finish()
        # Keep a plain connection open for the answers still being written (TLS cannot).
        return self.transport is not None and self.transport.get_extra_info("sslcontext") is None

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        self._finish()
        for drainer in self._drainers:
            if not drainer.done():
                drainer.set_exception(ConnectionResetError("the connection was lost"))
        self._drainers.clear()
        if not self._closed.done():
            self._closed.set_result(None)

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        for drainer in self._drainers:
            if not drainer.done():
                drainer.set_result(None)
        self._drainers.clear()

    def _cut(self) -> None:
        """Whole frames out of the scratch buffer; a large one gets its own buffer."""
        buf = self._buf
        while self._end - self._start >= _SIZE.size:
            size = _SIZE.unpack_from(buf, self._start)[0]
            if size < 8 or size > self._max:
                self._fail(f"frame size {size} outside 8..{self._max}")
                return
            begin = self._start + _SIZE.size
            have = self._end - begin
            if have >= size:
                self._start = begin + size
                self._deliver(bytes(memoryview(buf)[begin : begin + size]))
                continue
            if _SIZE.size + size > len(buf):
                frame = bytearray(size)
                frame[:have] = memoryview(buf)[begin : self._end]
                self._frame, self._filled = frame, have
                self._start = self._end = 0
            return

    def _deliver(self, frame: bytes | bytearray) -> None:
        self._frames.append(frame)
        self._queued += len(frame)
        if self._queued >= MAX_QUEUED_BYTES and not self._read_paused:
            self._read_paused = True
            if self.transport is not None:
                self.transport.pause_reading()
        self._wake()

    def _fail(self, problem: str) -> None:
        self._problem = problem
        self._done = True
        if self.transport is not None and not self._read_paused:
            self._read_paused = True
            self.transport.pause_reading()
        self._wake()

    def _finish(self) -> None:
        if self._done:
            return
        if self._frame is not None:
            self._problem = f"the connection ended inside a {len(self._frame)}-byte frame"
        elif self._end - self._start >= _SIZE.size:
            size = _SIZE.unpack_from(self._buf, self._start)[0]
            self._problem = f"the connection ended inside a {size}-byte frame"
        elif self._end > self._start:
            self._problem = "the connection ended inside a frame size"
        self._done = True
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    # -- the listener's side -------------------------------------------------------------------

    async def next_frame(self) -> bytes | bytearray | None:
        """The next frame; None once the connection ended cleanly between frames; FrameError
        when it cannot go on."""
        while not self._frames:
            if self._done:
                if self._problem is not None:
                    raise FrameError(self._problem)
                return None
            self._waiter = asyncio.get_running_loop().create_future()
            await self._waiter
            self._waiter = None
        frame = self._frames.popleft()
        self._queued -= len(frame)
        if self._read_paused and not self._done and self._queued < MAX_QUEUED_BYTES:
            self._read_paused = False
            if self.transport is not None:
                self.transport.resume_reading()
        return frame

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default if self.transport is None else self.transport.get_extra_info(name, default)

    def write(self, data: bytes | memoryview) -> None:
        if self.transport is not None:
            self.transport.write(data)

    async def drain(self) -> None:
        """Wait while the transport's write buffer is full."""
        if self._lost:
            raise ConnectionResetError("the connection was lost")
        if not self._write_paused:
            return
        drainer = asyncio.get_running_loop().create_future()
        self._drainers.append(drainer)
        await drainer

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    async def wait_closed(self) -> None:
        await self._closed

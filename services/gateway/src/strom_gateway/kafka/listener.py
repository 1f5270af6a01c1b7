"""The Kafka listener: an asyncio TCP server speaking Kafka's framing.

Each connection reads frames (an int32 size, then the request), starts each request's handler
as it arrives (so a long poll or a rebalance does not stop the requests behind it from being
read) and writes the responses in request order, as Kafka clients expect. At most
``MAX_IN_FLIGHT`` requests per connection are pending; reading waits beyond that.

A frame that cannot be a request (a size below 8 or above ``max_frame_bytes``, a body that
does not parse) closes that connection with one log line; an API or version Strom does not
serve is answered UNSUPPORTED_VERSION (``protocol.frames.unsupported_frame``). A handler that fails
unexpectedly closes its connection too (after logging the error): the client reconnects and
retries, and nothing else is affected.

A secured listener serves TLS (``tls``) and has a ``gate`` (``kafka.security``): each request
passes it in order before being dispatched, and it may answer the request itself (SASL) or
close the connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import socket
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias

import structlog

from strom_gateway.kafka.frame_stream import FrameError, FrameStream
from strom_gateway.kafka.protocol.codec import MalformedMessageError
from strom_gateway.kafka.protocol.frames import (
    Request,
    Unsupported,
    parse_request,
    response_frame,
    response_parts,
    unsupported_frame,
)
from strom_gateway.kafka.protocol.messages import APIS

log = structlog.get_logger(__name__)

__all__ = [
    "DRAIN_S",
    "MAX_IN_FLIGHT",
    "Admission",
    "Connection",
    "Dispatch",
    "Gate",
    "KafkaListener",
    "served_versions",
]

MAX_IN_FLIGHT = 64
#: How long requests read before a client closed its connection may still finish (an acks=0
#: Produce sent just before closing is still written).
DRAIN_S = 10.0

#: A response frame, or the task answering a request with one as parts (None: no response).
_Pending: TypeAlias = "asyncio.Task[list[bytes | memoryview] | None] | bytes | None"

#: Answers one request: the response body, or None for none (Produce with acks=0).
Dispatch = Callable[[Request, "Connection"], Awaitable[dict[str, Any] | None]]


def served_versions() -> list[dict[str, int]]:
    """ApiVersions' list: every API with the versions Strom serves."""
    return [
        {"api_key": api.key, "min_version": api.min_version, "max_version": api.max_version}
        for api in sorted(APIS, key=lambda a: a.key)
    ]


class Connection:
    """One client connection; handlers keep per-connection state in ``state``."""

    _ids = itertools.count(1)

    def __init__(self, peer: str) -> None:
        self.id = next(self._ids)
        self.peer = peer
        self.state: dict[str, Any] = {}
        self.closers: list[Callable[[], Awaitable[None]]] = []

    async def close(self) -> None:
        for closer in self.closers:
            try:
                await closer()
            except Exception:
                log.exception("closing kafka connection state failed", connection=self.id)


@dataclass(frozen=True, slots=True)
class Admission:
    """A gate's own answer to a request (None: none) and whether to close after it."""

    body: dict[str, Any] | None
    close: bool = False


class Gate(Protocol):
    """What a secured listener asks about each connection and request."""

    def opened(self, connection: Connection) -> None: ...

    def admits(self, api_key: int, connection: Connection) -> bool:
        """Whether a request of ``api_key`` may be answered at all now (False: close)."""
        ...

    async def closed(self, connection: Connection) -> None: ...

    async def admit(self, request: Request, connection: Connection) -> Admission | None:
        """None: dispatch the request; else the gate's answer."""
        ...

    async def close(self) -> None:
        """The listener stopped and every connection is closed."""
        ...


class KafkaListener:
    """Serves Kafka clients on ``host:port`` (port 0: any free port), one ``dispatch`` for
    every request; ``tls`` and ``gate`` for a secured listener."""

    def __init__(
        self,
        dispatch: Dispatch,
        *,
        host: str,
        port: int,
        max_frame_bytes: int,
        tls: ssl.SSLContext | None = None,
        gate: Gate | None = None,
    ) -> None:
        self._dispatch = dispatch
        self._host = host
        self._port = port
        self._max_frame_bytes = max_frame_bytes
        self._tls = tls
        self._gate = gate
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._closing = False

    async def start(self) -> int:
        """Bind and listen; returns the bound port."""
        self._server = await asyncio.get_running_loop().create_server(
            lambda: FrameStream(self._max_frame_bytes, opened=self._opened),
            self._host,
            self._port,
            reuse_address=True,
            ssl=self._tls,
        )
        sock = self._server.sockets[0]
        port: int = sock.getsockname()[1]
        log.info("kafka listener started", host=self._host, port=port, tls=self._tls is not None)
        return port

    async def close(self) -> None:
        self._closing = True
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
        if self._gate is not None:
            await self._gate.close()

    def _opened(self, stream: FrameStream) -> None:
        task = asyncio.ensure_future(self._serve(stream))
        self._connections.add(task)
        task.add_done_callback(self._connections.discard)

    async def _serve(self, stream: FrameStream) -> None:
        sock = stream.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        peer = stream.get_extra_info("peername")
        connection = Connection(f"{peer[0]}:{peer[1]}" if peer else "?")
        if self._gate is not None:
            self._gate.opened(connection)
        pending: asyncio.Queue[_Pending]
        pending = asyncio.Queue(MAX_IN_FLIGHT)
        sender = asyncio.ensure_future(self._send(pending, stream, connection))
        try:
            await self._read(stream, pending, connection, sender)
        except ConnectionError:
            pass
        finally:
            await self._finish(pending, sender, stream, connection)

    async def _read(
        self,
        stream: FrameStream,
        pending: asyncio.Queue[_Pending],
        connection: Connection,
        sender: asyncio.Future[None],
    ) -> None:
        while not sender.done():
            try:
                frame = await stream.next_frame()
            except FrameError as exc:
                self._malformed(connection, str(exc))
                return
            if frame is None:
                return
            try:
                request = parse_request(frame)
            except MalformedMessageError as exc:
                self._malformed(connection, str(exc), bytes(frame[:64]))
                return
            if isinstance(request, Unsupported):
                if self._gate is not None and not self._gate.admits(request.api_key, connection):
                    return
                log.info(
                    "kafka request not supported",
                    api_key=request.api_key,
                    api_version=request.version,
                    connection=connection.id,
                )
                await pending.put(unsupported_frame(request, served_versions()))
                continue
            if self._gate is not None:
                try:
                    admission = await self._gate.admit(request, connection)
                except Exception:
                    log.exception("kafka request failed at the gate; closing its connection",
                                  connection=connection.id, peer=connection.peer)  # fmt: skip
                    return
                if admission is not None:
                    if admission.body is not None:
                        await pending.put(
                            response_frame(request.api, request.version,
                                           request.correlation_id, admission.body)
                        )  # fmt: skip
                    if admission.close:
                        return
                    continue
            await pending.put(asyncio.ensure_future(self._answer(request, connection)))

    async def _answer(
        self, request: Request, connection: Connection
    ) -> list[bytes | memoryview] | None:
        body = await self._dispatch(request, connection)
        if body is None:
            return None
        return response_parts(request.api, request.version, request.correlation_id, body)

    @staticmethod
    async def _send(
        pending: asyncio.Queue[_Pending],
        writer: FrameStream,
        connection: Connection,
    ) -> None:
        while (item := await pending.get()) is not None:
            if isinstance(item, bytes):
                frame: list[bytes | memoryview] | bytes | None = item
            else:
                try:
                    frame = await item
                except Exception:
                    log.exception("kafka request failed; closing its connection",
                                  connection=connection.id, peer=connection.peer)  # fmt: skip
                    return
            if isinstance(frame, bytes):
                writer.write(frame)
            elif frame is not None:
                for part in frame:  # a large part is sent or buffered as it is: no join
                    writer.write(part)
            if frame is not None:
                await writer.drain()

    async def _finish(
        self,
        pending: asyncio.Queue[_Pending],
        sender: asyncio.Future[None],
        writer: FrameStream,
        connection: Connection,
    ) -> None:
        if not sender.done() and not self._closing:
            with contextlib.suppress(asyncio.QueueFull):
                pending.put_nowait(None)
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(sender), DRAIN_S)
        sender.cancel()
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await sender
        while not pending.empty():
            left = pending.get_nowait()
            if isinstance(left, asyncio.Task):
                left.cancel()
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()
        await connection.close()
        if self._gate is not None:
            await self._gate.closed(connection)

    @staticmethod
    def _malformed(connection: Connection, reason: str, head: bytes = b"") -> None:
        log.warning(
            "malformed kafka frame; closing the connection",
            reason=reason,
            peer=connection.peer,
            connection=connection.id,
            header=head.hex(),
        )

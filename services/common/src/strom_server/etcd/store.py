"""Async access to etcd: reads, guarded transactions, leases and watches, surviving lost links.

Built on the gRPC stubs that ship with ``python3-etcd3`` (``etcd3.etcdrpc``) but driven through
``grpc.aio``, so that calls are cancellable coroutines rather than threads: the package's
synchronous client would need a thread per call and its watcher thread does not report a
broken stream. Every Strom service reaches etcd through this module (strom_server.etcd.store).

Connectivity: one channel per configured endpoint (several for an etcd cluster). A call that
fails with UNAVAILABLE / DEADLINE_EXCEEDED moves to the next endpoint and, when ``retry`` is
on, is retried with exponential backoff (capped by ``backoff_max_s``) until ``deadline_s``;
each outage is logged once when it starts (``etcd unreachable``) and once when it ends (``etcd
reachable again``). Watches reconnect by themselves and resume after the last revision they
delivered, so no event is lost or repeated.

Thread-safety: use one ``EtcdStore`` from one event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
from etcd3 import etcdrpc
from etcd3.etcdrpc import kv_pb2

from strom.cluster.retry import Backoff
from strom.errors import StromError
from strom_server.runtime.clock import Clock, SystemClock
from strom_server.runtime.logs import get_logger

__all__ = [
    "Compare",
    "Delete",
    "EtcdStore",
    "EtcdUnavailableError",
    "KeyValue",
    "Op",
    "Put",
    "TxnResult",
    "WatchBatch",
    "WatchCompactedError",
    "WatchEvent",
    "configure_tls",
]

log = get_logger(__name__)

_RETRY_CODES = frozenset(
    {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNKNOWN}
)


class EtcdUnavailableError(StromError):
    """etcd could not be reached (every endpoint failed) within the allowed time."""

    retriable = True


class WatchCompactedError(StromError):
    """A watch asked for revisions etcd has compacted away; reload and watch again."""

    def __init__(self, compact_revision: int) -> None:
        super().__init__(f"revision compacted up to {compact_revision}")
        self.compact_revision = compact_revision


@dataclass(frozen=True)
class KeyValue:
    key: str
    value: bytes
    create_revision: int
    mod_revision: int
    lease: int = 0


@dataclass(frozen=True)
class Put:
    key: str
    value: bytes
    lease: int = 0


@dataclass(frozen=True)
class Delete:
    """Delete ``key``, or every key starting with it when ``prefix``."""

    key: str
    prefix: bool = False


Op = Put | Delete


@dataclass(frozen=True)
class Compare:
    """One transaction condition: ``target`` of ``key`` ``op`` ``value``."""

    key: str
    target: str  # "value" | "create" | "mod" | "version"
    value: bytes | int
    op: str = "=="

    @classmethod
    def value_equals(cls, key: str, value: bytes) -> Compare:
        return cls(key, "value", value)

    @classmethod
    def absent(cls, key: str) -> Compare:
        return cls(key, "create", 0)

    @classmethod
    def exists(cls, key: str) -> Compare:
        return cls(key, "create", 0, ">")

    @classmethod
    def mod_equals(cls, key: str, revision: int) -> Compare:
        return cls(key, "mod", revision)


@dataclass(frozen=True)
class TxnResult:
    succeeded: bool
    revision: int


@dataclass(frozen=True)
class WatchEvent:
    kind: str  # "put" | "delete"
    kv: KeyValue


@dataclass(frozen=True)
class WatchBatch:
    events: tuple[WatchEvent, ...]
    revision: int


_OPS = {
    "==": etcdrpc.Compare.EQUAL,
    "!=": etcdrpc.Compare.NOT_EQUAL,
    "<": etcdrpc.Compare.LESS,
    ">": etcdrpc.Compare.GREATER,
}
_TARGETS = {
    "value": etcdrpc.Compare.VALUE,
    "create": etcdrpc.Compare.CREATE,
    "mod": etcdrpc.Compare.MOD,
    "version": etcdrpc.Compare.VERSION,
}


def prefix_end(prefix: bytes) -> bytes:
    """The range end covering every key that starts with ``prefix``."""
    raw = bytearray(prefix)
    while raw:
        if raw[-1] < 0xFF:
            raw[-1] += 1
            return bytes(raw)
        raw.pop()
    return b"\0"


def _kv(raw: Any) -> KeyValue:
    return KeyValue(
        raw.key.decode(), bytes(raw.value), raw.create_revision, raw.mod_revision, raw.lease
    )


def _compare_message(c: Compare) -> Any:
    msg = etcdrpc.Compare(key=c.key.encode(), result=_OPS[c.op], target=_TARGETS[c.target])
    if c.target == "value":
        msg.value = c.value if isinstance(c.value, bytes) else str(c.value).encode()
    elif c.target == "create":
        msg.create_revision = int(c.value)
    elif c.target == "mod":
        msg.mod_revision = int(c.value)
    else:
        msg.version = int(c.value)
    return msg


def _op_message(op: Op) -> Any:
    if isinstance(op, Put):
        return etcdrpc.RequestOp(
            request_put=etcdrpc.PutRequest(key=op.key.encode(), value=op.value, lease=op.lease)
        )
    key = op.key.encode()
    request = etcdrpc.DeleteRangeRequest(key=key)
    if op.prefix:
        request.range_end = prefix_end(key)
    return etcdrpc.RequestOp(request_delete_range=request)


def _target(endpoint: str) -> str:
    for scheme in ("http://", "https://"):
        if endpoint.startswith(scheme):
            return endpoint[len(scheme) :]
    return endpoint


_tls: grpc.ChannelCredentials | None = None


def configure_tls(cafile: str, certfile: str = "", keyfile: str = "") -> None:
    """Make every ``EtcdStore`` created from now on reach etcd over TLS, trusting ``cafile``
    and presenting ``certfile``/``keyfile`` when given (a service's main does it from its
    ``etcd.ssl.cafile`` setting)."""
    global _tls

    def read(path: str) -> bytes | None:
        return Path(path).read_bytes() if path else None

    _tls = grpc.ssl_channel_credentials(read(cafile), read(keyfile), read(certfile))


class EtcdStore:
    """Coroutines over etcd's KV, Lease and Watch APIs with endpoint failover and retries."""

    def __init__(
        self,
        endpoints: Sequence[str],
        *,
        clock: Clock | None = None,
        call_timeout_s: float = 5.0,
        backoff_max_s: float = 2.0,
        tls: grpc.ChannelCredentials | None = None,
    ) -> None:
        if not endpoints:
            raise ValueError("at least one etcd endpoint is needed")
        self.endpoints = [_target(e) for e in endpoints]
        self._clock = clock or SystemClock()
        self._call_timeout_s = call_timeout_s
        self._backoff_max_s = backoff_max_s
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._tls = _tls if tls is None else tls
        self._current = 0
        self._outage_since: float | None = None
        self._closed = False

    # --- channels and retries ------------------------------------------------------------

    def _channel(self) -> grpc.aio.Channel:
        target = self.endpoints[self._current]
        channel = self._channels.get(target)
        if channel is None:
            options = [
                ("grpc.keepalive_time_ms", 10_000),
                ("grpc.keepalive_timeout_ms", 5_000),
                ("grpc.initial_reconnect_backoff_ms", 100),
                ("grpc.max_reconnect_backoff_ms", 1_000),
            ]
            if self._tls is None:
                channel = grpc.aio.insecure_channel(target, options=options)
            else:
                channel = grpc.aio.secure_channel(target, self._tls, options=options)
            self._channels[target] = channel
        return channel

    @property
    def tls(self) -> grpc.ChannelCredentials | None:
        """The TLS credentials calls use (None: plaintext), for a channel of another kind."""
        return self._tls

    @property
    def endpoint(self) -> str:
        """The endpoint calls currently go to."""
        return self.endpoints[self._current]

    def _failed(self, what: str, exc: grpc.aio.AioRpcError) -> None:
        failed = self.endpoint
        self._current = (self._current + 1) % len(self.endpoints)
        if self._outage_since is None:
            self._outage_since = self._clock.monotonic()
            log.warning(
                "etcd unreachable, retrying",
                call=what,
                endpoint=failed,
                next_endpoint=self.endpoint,
                code=exc.code().name,
                details=exc.details(),
            )

    def _succeeded(self) -> None:
        if self._outage_since is not None:
            log.info(
                "etcd reachable again",
                endpoint=self.endpoint,
                outage_s=round(self._clock.monotonic() - self._outage_since, 3),
            )
            self._outage_since = None

    async def _unary(
        self,
        stub_name: str,
        method: str,
        request: Any,
        *,
        retry: bool = True,
        deadline_s: float | None = None,
        timeout_s: float | None = None,
    ) -> Any:
        start = self._clock.monotonic()
        backoff = Backoff(0.05, self._backoff_max_s)
        while True:
            if self._closed:
                raise EtcdUnavailableError("the etcd store is closed")
            stub = getattr(etcdrpc, stub_name)(self._channel())
            try:
                response = await getattr(stub, method)(
                    request, timeout=timeout_s or self._call_timeout_s
                )
            except grpc.aio.AioRpcError as exc:
                if exc.code() not in _RETRY_CODES:
                    raise
                self._failed(method, exc)
                elapsed = self._clock.monotonic() - start
                delay = backoff.next()
                if not retry or (deadline_s is not None and elapsed + delay > deadline_s):
                    raise EtcdUnavailableError(
                        f"etcd {method} failed on every endpoint ({', '.join(self.endpoints)}):"
                        f" {exc.code().name} {exc.details()}"
                    ) from None
                await self._clock.sleep(delay)
                continue
            self._succeeded()
            return response

    # --- KV ------------------------------------------------------------------------------

    async def get(self, key: str, **kwargs: Any) -> KeyValue | None:
        response = await self._unary(
            "KVStub", "Range", etcdrpc.RangeRequest(key=key.encode()), **kwargs
        )
        return _kv(response.kvs[0]) if response.kvs else None

    async def get_prefix(self, prefix: str, **kwargs: Any) -> tuple[list[KeyValue], int]:
        """Every key under ``prefix`` and the store revision they were read at."""
        raw = prefix.encode()
        response = await self._unary(
            "KVStub", "Range", etcdrpc.RangeRequest(key=raw, range_end=prefix_end(raw)), **kwargs
        )
        return [_kv(kv) for kv in response.kvs], response.header.revision

    async def put(self, key: str, value: bytes, lease: int = 0, **kwargs: Any) -> int:
        response = await self._unary(
            "KVStub",
            "Put",
            etcdrpc.PutRequest(key=key.encode(), value=value, lease=lease),
            **kwargs,
        )
        return int(response.header.revision)

    async def delete(self, key: str, *, prefix: bool = False, **kwargs: Any) -> int:
        raw = key.encode()
        request = etcdrpc.DeleteRangeRequest(key=raw)
        if prefix:
            request.range_end = prefix_end(raw)
        response = await self._unary("KVStub", "DeleteRange", request, **kwargs)
        return int(response.header.revision)

    async def txn(
        self,
        compares: Sequence[Compare],
        success: Sequence[Op],
        failure: Sequence[Op] = (),
        **kwargs: Any,
    ) -> TxnResult:
        request = etcdrpc.TxnRequest(
            compare=[_compare_message(c) for c in compares],
            success=[_op_message(op) for op in success],
            failure=[_op_message(op) for op in failure],
        )
        response = await self._unary("KVStub", "Txn", request, **kwargs)
        return TxnResult(bool(response.succeeded), int(response.header.revision))

    # --- leases (kept alive from a thread: lease_keeper) ---------------------------------

    async def grant_lease(self, ttl_s: int, **kwargs: Any) -> int:
        response = await self._unary(
            "LeaseStub", "LeaseGrant", etcdrpc.LeaseGrantRequest(TTL=ttl_s), **kwargs
        )
        if response.error:
            raise EtcdUnavailableError(f"etcd refused a lease: {response.error}")
        return int(response.ID)

    async def revoke_lease(self, lease_id: int, **kwargs: Any) -> None:
        try:
            await self._unary(
                "LeaseStub", "LeaseRevoke", etcdrpc.LeaseRevokeRequest(ID=lease_id), **kwargs
            )
        except grpc.aio.AioRpcError as exc:
            if exc.code() != grpc.StatusCode.NOT_FOUND:
                raise

    # --- watches -------------------------------------------------------------------------

    async def watch_prefix(self, prefix: str, start_revision: int) -> AsyncIterator[WatchBatch]:
        """Every change under ``prefix`` from ``start_revision`` on, in order, forever.

        Reconnects (with backoff, moving between endpoints) when the stream breaks, resuming
        after the last delivered revision. Raises ``WatchCompactedError`` when the revisions
        it needs are gone. Cancel the consuming task to stop it.
        """
        raw = prefix.encode()
        next_revision = start_revision
        backoff = Backoff(0.05, self._backoff_max_s)
        while not self._closed:
            stop = asyncio.Event()

            async def requests(
                from_revision: int = next_revision, stop: asyncio.Event = stop
            ) -> AsyncIterator[Any]:
                yield etcdrpc.WatchRequest(
                    create_request=etcdrpc.WatchCreateRequest(
                        key=raw,
                        range_end=prefix_end(raw),
                        start_revision=from_revision,
                        progress_notify=True,
                    )
                )
                await stop.wait()

            call = etcdrpc.WatchStub(self._channel()).Watch(requests())
            try:
                async for response in call:
                    self._succeeded()
                    backoff.reset()
                    if response.compact_revision:
                        raise WatchCompactedError(int(response.compact_revision))
                    if response.canceled:
                        log.warning("etcd cancelled a watch", reason=response.cancel_reason)
                        break
                    if response.events:
                        events = tuple(
                            WatchEvent(
                                "delete" if e.type == kv_pb2.Event.DELETE else "put", _kv(e.kv)
                            )
                            for e in response.events
                        )
                        next_revision = events[-1].kv.mod_revision + 1
                        yield WatchBatch(events, int(response.header.revision))
                    elif not response.created:
                        next_revision = max(next_revision, int(response.header.revision) + 1)
            except grpc.aio.AioRpcError as exc:
                if exc.code() == grpc.StatusCode.CANCELLED and self._closed:
                    return
                self._failed("Watch", exc)
            finally:
                stop.set()
                call.cancel()
            await self._clock.sleep(backoff.next())

    async def close(self) -> None:
        self._closed = True
        channels, self._channels = list(self._channels.values()), {}
        for channel in channels:
            with contextlib.suppress(Exception):
                await channel.close()

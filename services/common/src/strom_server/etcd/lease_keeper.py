"""Keeps one etcd lease (a process's session) alive from a thread of its own.

A keep-alive sent from the process's event loop waits for that loop twice: to be sent, and for
its answer to be read before its timeout. A loop busy for a few seconds (thousands of
partitions to open at once, a loaded machine) then lets the session lapse although the process
is well and serving, and the controller moves everything it held. Here the keep-alive runs on a
plain thread with a synchronous gRPC channel of its own, so a busy loop cannot delay it.

It must not keep a session alive for a process that can no longer serve, though: it renews
only while ``may_renew()`` says so (the storage node passes "its event loop ticked within the
last keep-alive interval", ``strom_server.runtime.loop_watch``). A wedged loop therefore loses
its session within ``interval + TTL``, as with a keep-alive on the loop; a loop that is merely
slow no longer does.

Pace: one keep-alive every ``interval_s`` (a third of the TTL) after the last answered one;
after a failure or a skipped renewal it tries again every ``retry_s`` (not a whole interval
later). Each answered keep-alive renews ``lease`` (``session_lease.SessionLease``) from the time
it was sent. A keep-alive answered with TTL 0 (the lease expired in etcd) stops renewing that
lease and calls ``on_expired(lease_id)``, from this thread: the owner registers again and hands
the new lease over with ``keep``. Calls go to one endpoint, moving to the next on failure.

Thread-safety: ``keep``, ``start`` and ``stop`` from any thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import grpc
from etcd3 import etcdrpc

from strom_server.etcd.session_lease import SessionLease
from strom_server.runtime.logs import get_logger

log = get_logger(__name__)

__all__ = ["LeaseKeeper"]

#: How often a failed or skipped keep-alive is tried again.
RETRY_S = 0.1


class LeaseKeeper:
    """A thread renewing one etcd lease while ``may_renew()`` (see module docstring)."""

    def __init__(
        self,
        endpoints: Sequence[str],
        *,
        lease: SessionLease,
        interval_s: float,
        may_renew: Callable[[], bool],
        on_expired: Callable[[int], None],
        tls: grpc.ChannelCredentials | None = None,
        retry_s: float = RETRY_S,
        name: str = "etcd-lease-keeper",
    ) -> None:
        if not endpoints:
            raise ValueError("at least one etcd endpoint is needed")
        self._endpoints = list(endpoints)
        self._current = 0
        self._tls = tls
        self.lease = lease
        self.interval_s = interval_s
        self.retry_s = retry_s
        self._may_renew = may_renew
        self._on_expired = on_expired
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._lease_id = 0
        self._stopped = False
        self._channel: grpc.Channel | None = None
        self._failing = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        #: keep-alives etcd answered, and those that failed or timed out
        self.answered = 0
        self.failed = 0

    # -- control ------------------------------------------------------------------------------

    def keep(self, lease_id: int) -> None:
        """Renew ``lease_id`` from now on (0: none)."""
        with self._lock:
            self._lease_id = lease_id
            self._wake.notify_all()

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop renewing and wait for the thread (at most ``timeout_s``)."""
        with self._lock:
            self._stopped = True
            self._wake.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout_s)

    # -- the thread ---------------------------------------------------------------------------

    def _wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds`` or until ``keep``/``stop``; False once stopped."""
        with self._lock:
            if not self._stopped:
                self._wake.wait(max(0.0, seconds))
            return not self._stopped

    def _run(self) -> None:
        try:
            self._loop()
        finally:
            if self._channel is not None:
                self._channel.close()

    def _loop(self) -> None:
        skipped = False
        while True:
            with self._lock:
                if self._stopped:
                    return
                lease_id = self._lease_id
            if lease_id == 0:
                if not self._wait(self.interval_s):
                    return
                continue
            if not self._may_renew():
                if not skipped:
                    log.warning("event loop not ticking; etcd keep-alive held back",
                                lease=lease_id)  # fmt: skip
                skipped = True
                if not self._wait(self.retry_s):
                    return
                continue
            skipped = False
            sent_at = self.lease.now()
            try:
                ttl = self._keep_alive_once(lease_id)
            except grpc.RpcError as exc:
                self._failure(exc)
                if not self._wait(self.retry_s):
                    return
                continue
            if self._failing:
                log.info("etcd keep-alive answered again", endpoint=self._endpoints[self._current])
                self._failing = False
            self.answered += 1
            if ttl > 0:
                self.lease.renewed(sent_at, ttl)
                if not self._wait(self.interval_s - (self.lease.now() - sent_at)):
                    return
                continue
            with self._lock:
                if self._lease_id == lease_id:
                    self._lease_id = 0
            log.warning("etcd lease expired", lease=lease_id)
            try:
                self._on_expired(lease_id)
            except Exception:
                log.exception("lease expiry handler failed")

    def _stub(self) -> etcdrpc.LeaseStub:
        if self._channel is None:
            target = self._endpoints[self._current]
            if self._tls is None:
                self._channel = grpc.insecure_channel(target)
            else:
                self._channel = grpc.secure_channel(target, self._tls)
        return etcdrpc.LeaseStub(self._channel)

    def _keep_alive_once(self, lease_id: int) -> int:
        """The TTL etcd answers for one keep-alive of ``lease_id`` (0: expired)."""
        call = self._stub().LeaseKeepAlive(
            iter([etcdrpc.LeaseKeepAliveRequest(ID=lease_id)]), timeout=self.interval_s
        )
        try:
            for response in call:
                return int(response.TTL)
        finally:
            call.cancel()
        return 0

    def _failure(self, exc: grpc.RpcError) -> None:
        """Count a failed keep-alive (logged once per run of failures); next endpoint."""
        self.failed += 1
        if not self._failing:
            code = exc.code() if isinstance(exc, grpc.Call) else None
            log.warning("etcd keep-alive failed; retrying", endpoint=self._endpoints[self._current],
                        code=getattr(code, "name", str(code)))  # fmt: skip
            self._failing = True
        if len(self._endpoints) > 1 and self._channel is not None:
            self._channel.close()
            self._channel = None
            self._current = (self._current + 1) % len(self._endpoints)

"""The local control channel of ``strom cluster up``: one JSON request per connection.

The supervisor listens on a Unix socket (mode 0600: only its user may command it) and serves
requests from its own loop between ticks, so a request never races the process states it
changes. A request is one line of JSON (``{"op": "stop", "name": "storage-2"}``), the reply one
line of JSON (``{"ok": true, "message": "..."}`` or ``{"ok": false, "error": "..."}``).
"""

from __future__ import annotations

import hashlib
import json
import os
import selectors
import socket
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog

log = structlog.get_logger(__name__)

__all__ = ["MAX_REQUEST_BYTES", "ControlServer", "send_request", "socket_path_for"]

MAX_REQUEST_BYTES = 64 * 1024
#: sockaddr_un's sun_path holds 108 bytes, the terminating NUL included.
_MAX_PATH_BYTES = 107

Handler = Callable[[dict[str, Any]], dict[str, Any]]


def socket_path_for(data_dir: Path) -> Path:
    """``<data_dir>/supervisor.sock``, or a path in the temp directory named after the data
    directory when that one is too long for a Unix socket."""
    path = data_dir / "supervisor.sock"
    if len(os.fsencode(path)) <= _MAX_PATH_BYTES:
        return path
    digest = hashlib.sha256(os.fsencode(data_dir)).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"strom-{os.getuid()}-{digest}.sock"


class ControlServer:
    """Listens on ``path``; ``serve(timeout_s)`` answers the requests that arrive meanwhile."""

    def __init__(self, path: Path, handler: Handler) -> None:
        self.path = path
        self._handler = handler
        path.unlink(missing_ok=True)  # a stale socket of a supervisor that was killed
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old_umask = os.umask(0o177)
        try:
            self._listener.bind(str(path))
        finally:
            os.umask(old_umask)
        self._listener.listen(8)
        self._listener.setblocking(False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ)

    def serve(self, timeout_s: float) -> int:
        """Wait up to ``timeout_s`` for connections and answer each one's request; returns how
        many were answered."""
        answered = 0
        if not self._selector.select(timeout_s):
            return answered
        while True:
            try:
                conn, _ = self._listener.accept()
            except BlockingIOError:
                return answered
            with conn:
                self._answer(conn)
            answered += 1

    def _answer(self, conn: socket.socket) -> None:
        conn.settimeout(2.0)
        try:
            raw = _read_line(conn)
            try:
                request = json.loads(raw)
                if not isinstance(request, dict):
                    raise ValueError("a request is a JSON object")
            except ValueError as exc:
                reply: dict[str, Any] = {"ok": False, "error": f"malformed request: {exc}"}
            else:
                reply = self._handler(request)
            conn.sendall(json.dumps(reply).encode() + b"\n")
        except OSError as exc:  # the client went away, or sent too much / too slowly
            log.warning("control request failed", error=str(exc))

    def close(self) -> None:
        self._selector.close()
        self._listener.close()
        self.path.unlink(missing_ok=True)


def _read_line(conn: socket.socket) -> bytes:
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(4096)
        if not chunk:
            break
        data += chunk
        if len(data) > MAX_REQUEST_BYTES:
            raise OSError(f"control request larger than {MAX_REQUEST_BYTES} bytes")
    return data


def send_request(path: Path, request: dict[str, Any], timeout_s: float = 10.0) -> dict[str, Any]:
    """Send one request to the supervisor listening on ``path`` and return its reply.

    Raises ConnectionError when no supervisor answers there.
    """
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout_s)
        try:
            sock.connect(str(path))
            sock.sendall(json.dumps(request).encode() + b"\n")
            raw = _read_line(sock)
        except OSError as exc:
            raise ConnectionError(f"no supervisor answers on {path}: {exc}") from None
    try:
        reply = json.loads(raw)
    except ValueError:
        raise ConnectionError(f"the supervisor on {path} sent a malformed reply") from None
    if not isinstance(reply, dict):
        raise ConnectionError(f"the supervisor on {path} sent a malformed reply")
    return reply

"""Run a single-member etcd server as a child process, for tests and local clusters.

::

    with EtcdProcess() as etcd:            # free loopback ports, a temporary data directory
        client = etcd3.client(etcd.host, etcd.port)
        client.put("/strom/k", "v")

``start`` picks free ports (unless given), launches ``etcd`` (found by
``strom_server.etcd.binary.find_etcd``), and waits until ``/health`` answers; if that fails it
stops the process, removes what it created and raises ``EtcdStartError`` with the end of
etcd's output. ``stop`` terminates (then kills) the process and removes a temporary data
directory. Both are blocking: from async code call them through ``asyncio.to_thread``. The same
holds for the ``python3-etcd3`` client (``import etcd3``), which is synchronous and gRPC-based:
run its calls in a thread from async code.
"""

from __future__ import annotations

import json
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from strom_server.etcd.binary import find_etcd

__all__ = ["EtcdProcess", "EtcdStartError", "EtcdTls", "etcd_argv", "etcd_is_healthy"]


class EtcdStartError(RuntimeError):
    """etcd did not become healthy; the message ends with its last output lines."""


def _free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def etcd_is_healthy(client_url: str, timeout_s: float = 1.0, *, tls: EtcdTls | None = None) -> bool:
    """Whether the etcd at ``client_url`` (``http://host:port``, or ``https://`` with ``tls``:
    its CA and a client certificate) reports itself healthy."""
    context = None
    if tls is not None:
        context = ssl.create_default_context(cafile=str(tls.cafile))
        context.load_cert_chain(str(tls.certfile), str(tls.keyfile))
    try:
        with urllib.request.urlopen(
            f"{client_url}/health", timeout=timeout_s, context=context
        ) as response:
            return json.loads(response.read()).get("health") == "true"
    except (OSError, ValueError):
        return False


def etcd_argv(
    binary: Path,
    *,
    name: str,
    data_dir: Path,
    host: str,
    client_port: int,
    peer_port: int,
    unsafe_no_fsync: bool = False,
    tls: EtcdTls | None = None,
) -> list[str]:
    """Command line of a single-member etcd listening on ``host`` only; with ``tls`` its client
    API is https and asks every client for a certificate signed by the CA."""
    client_url = f"{'https' if tls else 'http'}://{host}:{client_port}"
    peer_url = f"http://{host}:{peer_port}"
    argv = [
        str(binary),
        "--name", name,
        "--data-dir", str(data_dir),
        "--listen-client-urls", client_url,
        "--advertise-client-urls", client_url,
        "--listen-peer-urls", peer_url,
        "--initial-advertise-peer-urls", peer_url,
        "--initial-cluster", f"{name}={peer_url}",
        "--log-level", "warn",
    ]  # fmt: skip
    if unsafe_no_fsync:
        argv.append("--unsafe-no-fsync")
    if tls is not None:
        argv += [
            "--cert-file", str(tls.certfile),
            "--key-file", str(tls.keyfile),
            "--trusted-ca-file", str(tls.cafile),
            "--client-cert-auth",
        ]  # fmt: skip
    return argv


@dataclass(frozen=True)
class EtcdTls:
    """TLS files of etcd's client API: a certificate and key, and the CA of both sides."""

    certfile: Path
    keyfile: Path
    cafile: Path


class EtcdProcess:
    """A single-member etcd on loopback; a context manager (start on enter, stop on exit)."""

    def __init__(
        self,
        data_dir: Path | None = None,
        *,
        host: str = "127.0.0.1",
        client_port: int = 0,
        peer_port: int = 0,
        name: str = "strom-etcd",
        binary: Path | None = None,
        unsafe_no_fsync: bool = True,
        log_path: Path | None = None,
    ) -> None:
        """Port 0 picks a free port. Without ``data_dir`` a temporary one is made and removed.

        ``unsafe_no_fsync`` (the default, for tests) trades durability for speed. etcd's output
        goes to ``log_path``, or to ``etcd.log`` beside the data directory.
        """
        self.host = host
        self.name = name
        self._data_dir = data_dir
        self._wanted_ports = (client_port, peer_port)
        self._binary = binary
        self._unsafe_no_fsync = unsafe_no_fsync
        self._log_path = log_path
        self._temp_dir: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.peer_port = 0

    @property
    def client_url(self) -> str:
        """``http://host:port`` of the client API."""
        return f"http://{self.host}:{self.port}"

    @property
    def endpoint(self) -> str:
        """``host:port`` of the client API (what ``--etcd-endpoints`` takes)."""
        return f"{self.host}:{self.port}"

    @property
    def data_dir(self) -> Path:
        if self._data_dir is not None:
            return self._data_dir
        if self._temp_dir is None:
            raise RuntimeError("etcd has not started")
        return self._temp_dir / "data"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def start(self, timeout_s: float = 30.0) -> EtcdProcess:
        """Launch etcd and wait until healthy; cleans up and raises ``EtcdStartError`` if not."""
        if self._process is not None:
            raise RuntimeError("etcd is already running")
        attempts = 1 if all(self._wanted_ports) else 3  # a picked free port can be taken
        for attempt in range(1, attempts + 1):
            try:
                self._launch()
                self._wait_healthy(timeout_s)
                return self
            except EtcdStartError as exc:
                self.stop()
                if attempt == attempts or "address already in use" not in str(exc):
                    raise
            except BaseException:
                self.stop()
                raise
        raise AssertionError("unreachable")

    def _launch(self) -> None:
        binary = self._binary or find_etcd()
        if self._data_dir is None:
            self._temp_dir = Path(tempfile.mkdtemp(prefix="strom-etcd-"))
        data_dir = self.data_dir
        data_dir.parent.mkdir(parents=True, exist_ok=True)
        log_path = self._log_path or data_dir.parent / f"{self.name}.log"
        self._log_path = log_path
        self.port = self._wanted_ports[0] or _free_port(self.host)
        self.peer_port = self._wanted_ports[1] or _free_port(self.host)
        argv = etcd_argv(
            binary,
            name=self.name,
            data_dir=data_dir,
            host=self.host,
            client_port=self.port,
            peer_port=self.peer_port,
            unsafe_no_fsync=self._unsafe_no_fsync,
        )
        with open(log_path, "ab") as log_file:
            self._process = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT
            )

    def _wait_healthy(self, timeout_s: float) -> None:
        assert self._process is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise EtcdStartError(
                    f"etcd exited with code {self._process.returncode} during start-up\n"
                    + self.output_tail()
                )
            if etcd_is_healthy(self.client_url, timeout_s=0.5):
                return
            time.sleep(0.05)
        raise EtcdStartError(f"etcd not healthy after {timeout_s:.0f}s\n" + self.output_tail())

    def output_tail(self, lines: int = 20) -> str:
        """The last ``lines`` lines etcd wrote."""
        if self._log_path is None or not self._log_path.exists():
            return ""
        text = self._log_path.read_text(encoding="utf-8", errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout_s: float = 10.0) -> int | None:
        """Terminate etcd (kill after ``timeout_s``), remove a temporary data directory;
        returns etcd's exit code (None if it never ran). Safe to call more than once."""
        code: int | None = None
        process, self._process = self._process, None
        if process is not None:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout_s)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
            code = process.returncode
        if self._temp_dir is not None:
            shutil.rmtree(self._temp_dir, ignore_errors=True)
            self._temp_dir = None
        return code

    def __enter__(self) -> EtcdProcess:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

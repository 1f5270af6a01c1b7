"""Schema registry instances beside a test cluster: started as real processes on free ports,
stopped at teardown even when a test failed. Shared by tests/integration/registry and the Spark
connector's Avro tests (tests/ is on the import path)."""

from __future__ import annotations

import json
import ssl
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from cluster_testkit import LocalCluster, start_local_cluster
from strom_testkit import free_port, wait_until

from strom_server.local.supervisor import ManagedProcess

#: A short lease, so that a killed writer is replaced quickly.
SESSION_TIMEOUT_MS = 2000


def http(method: str, url: str, body: Any = None) -> tuple[int, Any]:
    """One JSON request; returns (status, decoded body)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, method=method,
        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
    )  # fmt: skip
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def _context(cafile: str | None) -> ssl.SSLContext | None:
    return ssl.create_default_context(cafile=cafile) if cafile else None


def _ready(url: str, cafile: str | None = None) -> bool:
    try:
        with urllib.request.urlopen(url + "/", timeout=2, context=_context(cafile)) as answer:
            return answer.status == 200
    except OSError:
        return False


@dataclass
class Registries:
    """Registry instances of one cluster, by name."""

    cluster: LocalCluster
    processes: dict[str, ManagedProcess] = field(default_factory=dict)
    started: list[ManagedProcess] = field(default_factory=list)
    #: Extra flags of every instance (security settings), and the CA of an https URL.
    flags: Sequence[str] = ()
    cafile: str | None = None

    def start(self, name: str, port: int | None = None) -> str:
        port = port or free_port()
        url = f"{'https' if self.cafile else 'http'}://127.0.0.1:{port}"
        cafile = self.cafile
        spec = self.cluster.spec
        process = ManagedProcess(
            name=name,
            argv=[
                sys.executable, "-m", "strom_registry", "--listen", f"127.0.0.1:{port}",
                "--bootstrap-servers", spec.gateway_address,
                "--etcd-endpoints", f"{spec.host}:{spec.etcd_client_port}",
                "--registry.session.timeout.ms", str(SESSION_TIMEOUT_MS), *self.flags,
            ],
            log_path=spec.data_dir / "logs" / f"{name}.log",
            ready=lambda: _ready(url, cafile),
            address=url,
        )  # fmt: skip
        self.processes[name] = process
        self.started.append(process)
        process.start()
        process.wait_ready(60.0)
        return url

    def url(self, name: str) -> str:
        return self.processes[name].address

    def writer(self) -> str:
        """The name of the running instance that is the writer (waits for an election)."""

        def find() -> str | None:
            for name, process in self.processes.items():
                if process.is_running() and _is_writer(process.address, self.cafile):
                    return name
            return None

        return wait_until(find, 30.0, "a registry writer")

    def stop_all(self) -> None:
        for process in reversed(self.started):
            process.stop(10.0)


def _is_writer(url: str, cafile: str | None = None) -> bool:
    try:
        with urllib.request.urlopen(url + "/", timeout=10, context=_context(cafile)) as answer:
            return answer.headers.get("X-Strom-Registry-Writer") == "true"
    except OSError:
        return False


@pytest.fixture(scope="module")
def registries(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registries]:
    """A cluster with two registry instances, ``a`` and ``b``."""
    # No coordinator: the registry and these tests use no group or transaction.
    for cluster in start_local_cluster(tmp_path_factory.mktemp("registry"), coordinators=0):
        found = Registries(cluster)
        try:
            found.start("a")
            found.start("b")
            yield found
        finally:
            found.stop_all()

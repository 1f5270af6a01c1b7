"""Network partitions for the fault harness: a local cluster whose processes reach each other
only through a fault-injecting proxy (partition_proxy.py), and a nemesis that cuts and heals
links through it.

Wiring: every server process (etcd, controllers, storage nodes, coordinators) keeps its public
port — the one in the cluster spec, advertised in etcd, dialled by every peer and client — but
really listens on a private port; the proxy listens on the public port and forwards. The
gateway is not proxied: it is the clients' side of the cluster, as are the test process and
the workload's subprocesses. A cut separates server processes from each other; clients (and
the gateway) still reach both sides, so a cut-off leader still hears producers — the case
that tells whether it knows it may no longer lead.

Nemesis (seeded): isolate one storage node (from etcd, the controllers, the other storage
nodes and the coordinators), isolate the active controller, isolate a coordinator, or split
the server processes into two random halves; each cut lasts longer than the etcd sessions
(so the majority side moves leadership and ownership), then heals.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos_harness import SESSION_MS, STORAGE_NODES, Nemesis
from cluster_testkit import LocalCluster
from strom_testkit import free_port

from strom_server.local.supervisor import ManagedProcess

PROXY_SCRIPT = Path(__file__).with_name("partition_proxy.py")
#: What a storage node / controller / coordinator is told to advertise.
_ADVERTISE_FLAG = {
    "storage": "--advertised-address",
    "controller": "--advertised-listen",
    "coordinator": "--advertised-listen",
}


class ProxyControl:
    """The test's side of the proxy's control socket."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def call(self, request: dict[str, Any]) -> dict[str, Any]:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(30)
            sock.connect(str(self.path))
            sock.sendall(json.dumps(request).encode() + b"\n")
            answer = b""
            while not answer.endswith(b"\n"):
                chunk = sock.recv(65536)
                if not chunk:
                    break
                answer += chunk
        result: dict[str, Any] = json.loads(answer)
        if not result.get("ok"):
            raise RuntimeError(f"partition proxy refused {request}: {result}")
        return result

    def block(self, pairs: list[tuple[str, str]]) -> None:
        self.call({"op": "block", "pairs": [list(p) for p in pairs]})

    def heal(self) -> int:
        return int(self.call({"op": "heal"})["closed"])

    def stats(self) -> dict[str, Any]:
        return self.call({"op": "stats"})


@dataclass
class ProxiedCluster(LocalCluster):
    """A LocalCluster whose server processes are reached through the partition proxy."""

    proxy: subprocess.Popen[bytes] | None = None
    control: ProxyControl | None = None
    servers: list[str] = field(default_factory=list)

    def start(self, ready_timeout_s: float = 60.0) -> None:
        processes = [self._behind_proxy(p) for p in self.spec.processes()]
        routes = [r for _, r in processes if r is not None]
        self.servers = [str(r["name"]) for r in routes]
        self._start_proxy(routes)
        for process, _ in processes:
            self.processes[process.name] = process
            self.started.append(process)
            process.start()
            process.wait_ready(ready_timeout_s)

    def _behind_proxy(
        self, process: ManagedProcess
    ) -> tuple[ManagedProcess, dict[str, Any] | None]:
        """The process listening on a private port and advertising its public one."""
        argv = list(process.argv)
        private = free_port()
        host = self.spec.host
        if process.name == "etcd":
            public = self.spec.etcd_client_port
            index = argv.index("--listen-client-urls") + 1
            argv[index] = f"http://{host}:{private}"
        elif process.role in _ADVERTISE_FLAG:
            index = argv.index("--listen") + 1
            public = int(argv[index].rpartition(":")[2])
            argv[index] = f"{host}:{private}"
            argv += [_ADVERTISE_FLAG[process.role], f"{host}:{public}"]
        else:
            return process, None  # the gateway: the clients' side
        process.argv = argv
        return process, {"name": process.name, "listen": public, "target": private}

    def _start_proxy(self, routes: list[dict[str, Any]]) -> None:
        config = self.spec.data_dir / "partition-proxy.json"
        control = self.spec.data_dir / "partition-proxy.sock"
        config.write_text(json.dumps({"control": str(control), "routes": routes}))
        log = self.spec.data_dir / "logs" / "partition-proxy.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "wb") as out:
            self.proxy = subprocess.Popen(
                [sys.executable, str(PROXY_SCRIPT), str(config)],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        self.control = ProxyControl(control)
        deadline = time.monotonic() + 30
        while b"ready" not in log.read_bytes():
            if self.proxy.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the partition proxy did not start: {log.read_text()}")
            time.sleep(0.05)

    def stop_all(self) -> None:
        try:
            super().stop_all()
        finally:
            if self.proxy is not None:
                self.proxy.terminate()
                try:
                    self.proxy.wait(10)
                except subprocess.TimeoutExpired:
                    self.proxy.kill()
                    self.proxy.wait()

    # -- cuts ---------------------------------------------------------------------------------

    def isolate(self, name: str) -> None:
        """Cut ``name`` off from every other server process."""
        assert self.control is not None
        self.control.block([(name, other) for other in self.servers if other != name])

    def split(self, side: list[str]) -> None:
        """Cut ``side`` off from the rest of the server processes."""
        assert self.control is not None
        rest = [s for s in self.servers if s not in side]
        self.control.block([(a, b) for a in side for b in rest])

    def heal_network(self) -> int:
        assert self.control is not None
        return self.control.heal()


class PartitionNemesis(Nemesis):
    """Partitions instead of crashes (see the module docstring)."""

    cluster: ProxiedCluster
    KINDS = ("isolate storage", "isolate controller", "isolate coordinator", "split halves")
    _next: list[str]

    def one_fault(self) -> None:
        """The next kind of a seeded shuffle of all four (each comes once per round)."""
        if not getattr(self, "_next", None):
            self._next = list(self.KINDS)
            self.rng.shuffle(self._next)
        kind = self._next.pop()
        seconds = self.rng.uniform(SESSION_MS / 1000 + 0.5, SESSION_MS / 1000 + 3)
        if kind == "isolate storage":
            name = f"storage-{self.rng.randint(1, STORAGE_NODES)}"
            self._note(f"isolate {name} for {seconds:.1f} s")
            self.cluster.isolate(name)
        elif kind == "isolate controller":
            name = self.active_controller() or f"controller-{self.rng.randint(1, 2)}"
            self._note(f"isolate {name} (the active controller) for {seconds:.1f} s")
            self.cluster.isolate(name)
        elif kind == "isolate coordinator":
            name = f"coordinator-{self.rng.randint(1, 2)}"
            self._note(f"isolate {name} for {seconds:.1f} s")
            self.cluster.isolate(name)
        else:
            servers = list(self.cluster.servers)
            self.rng.shuffle(servers)
            side = servers[: len(servers) // 2]
            self._note(f"split {sorted(side)} | {sorted(servers[len(side) :])} for {seconds:.1f} s")
            self.cluster.split(side)
        time.sleep(seconds)
        self._note(f"heal ({self.cluster.heal_network()} cut connections closed)")

    def heal(self) -> None:
        self.cluster.heal_network()
        super().heal()

"""Real etcd, real controller processes on free loopback ports, and a stand-in for storage-node
registration written with the etcd client exactly as storage nodes do it.

Imported by the tests of this folder (a unique module name: test folders are not packages).
One etcd serves the whole module; each test gets its own key prefix, so tests never see each
other's metadata (which also exercises the multi-cluster prefix)."""

from __future__ import annotations

import contextlib
import json
import signal
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import etcd3
import grpc
import pytest
from strom_testkit import wait_until

from strom.protocol.v1 import controller_pb2 as pb
from strom.protocol.v1 import controller_pb2_grpc
from strom_server.etcd.process import EtcdProcess
from strom_server.local.supervisor import ManagedProcess
from strom_server.rpc.health_probe import grpc_serving

CONTROLLER = str(Path(sys.executable).parent / "strom-controller")
TTL_MS = 2000


@dataclass
class RunningController:
    controller_id: int
    process: ManagedProcess
    address: str
    stub: controller_pb2_grpc.ControllerStub
    channel: grpc.Channel

    def metadata(self, *topics: str, auto_create: bool = False) -> pb.MetadataResponse:
        return self.stub.Metadata(
            pb.MetadataRequest(topics=topics, allow_auto_topic_creation=auto_create), timeout=5
        )

    def active_id(self) -> int | None:
        """The active controller this one names (None when unknown or unreachable)."""
        try:
            node = self.metadata().controller
        except grpc.RpcError:
            return None
        return node.node_id if node.node_id >= 0 and node.port else None

    def signal(self, sig: signal.Signals) -> None:
        assert self.process.popen is not None
        self.process.popen.send_signal(sig)

    def log_text(self) -> str:
        return self.process.log_path.read_text(errors="replace")


@dataclass
class Cluster:
    """Controllers and fake broker registrations under one fresh prefix of the shared etcd."""

    etcd: EtcdProcess
    prefix: str
    tmp_path: Path
    free_port: Callable[[], int]
    client: Any
    controllers: list[RunningController] = field(default_factory=list)
    leases: dict[int, Any] = field(default_factory=dict)

    def start_controller(
        self, controller_id: int, *flags: str, wait: bool = True, etcd_endpoints: str = ""
    ) -> RunningController:
        address = f"127.0.0.1:{self.free_port()}"
        argv = [
            CONTROLLER,
            "--controller-id", str(controller_id),
            "--listen", address,
            "--etcd-endpoints", etcd_endpoints or self.etcd.endpoint,
            "--etcd-prefix", self.prefix,
            "--controller.session.timeout.ms", str(TTL_MS),
            "--shutdown-grace", "2",
            *flags,
        ]  # fmt: skip
        process = ManagedProcess(
            name=f"controller-{controller_id}",
            argv=argv,
            log_path=self.tmp_path / f"controller-{controller_id}-{len(self.controllers)}.log",
            ready=lambda: grpc_serving(address),
        )
        process.start()
        channel = grpc.insecure_channel(address)
        running = RunningController(
            controller_id, process, address, controller_pb2_grpc.ControllerStub(channel), channel
        )
        self.controllers.append(running)
        if wait:
            process.wait_ready(30)
        return running

    def wait_active(self, controller: RunningController, timeout_s: float = 15.0) -> int:
        return wait_until(controller.active_id, timeout_s, "an active controller")

    def active(self, timeout_s: float = 15.0) -> RunningController:
        """The controller that is active (waits until one is and every live one agrees)."""

        def find() -> RunningController | None:
            alive = [c for c in self.controllers if c.process.exit_code() is None]
            ids = {c.active_id() for c in alive}
            if len(ids) != 1 or None in ids:
                return None
            active_id = ids.pop()
            return next((c for c in alive if c.controller_id == active_id), None)

        return wait_until(find, timeout_s, "one active controller all agree on")

    # --- storage-node stand-in -----------------------------------------------------------

    def register_broker(
        self, broker_id: int, *, rack: str = "", port: int = 0, ttl_s: int = 60
    ) -> bool:
        """Register like a storage node: create-if-absent on its own lease. False if taken."""
        key = f"{self.prefix}/brokers/ids/{broker_id}"
        value = json.dumps(
            {"id": broker_id, "host": "127.0.0.1", "port": port or 9000 + broker_id, "rack": rack}
        )
        lease = self.client.lease(ttl_s)
        ok, _ = self.client.transaction(
            compare=[self.client.transactions.create(key) == 0],
            success=[self.client.transactions.put(key, value, lease=lease)],
            failure=[],
        )
        if not ok:
            lease.revoke()
            return False
        self.leases[broker_id] = lease
        return True

    def keep_brokers_alive(self) -> None:
        for lease in self.leases.values():
            lease.refresh()

    def kill_broker(self, broker_id: int) -> None:
        """The node's lease goes (what its expiry after a crash does, without the wait)."""
        self.leases.pop(broker_id).revoke()

    def get_json(self, key: str) -> Any:
        value, _ = self.client.get(self.prefix + key)
        return json.loads(value) if value is not None else None

    def stop(self) -> None:
        for controller in self.controllers:
            controller.channel.close()
            if controller.process.popen is not None and controller.process.exit_code() is None:
                with contextlib.suppress(ProcessLookupError):
                    controller.process.popen.send_signal(signal.SIGCONT)
            controller.process.stop(5)
        for lease in self.leases.values():
            with contextlib.suppress(Exception):
                lease.revoke()
        self.client.close()


@pytest.fixture(scope="module")
def etcd_server() -> Iterator[EtcdProcess]:
    with EtcdProcess() as etcd:
        yield etcd


@pytest.fixture
def cluster(
    etcd_server: EtcdProcess, tmp_path: Path, free_port: Callable[[], int]
) -> Iterator[Cluster]:
    prefix = f"/strom-test-{uuid.uuid4().hex[:8]}"
    client = etcd3.client(etcd_server.host, etcd_server.port)
    running = Cluster(etcd_server, prefix, tmp_path, free_port, client)
    try:
        yield running
    finally:
        running.stop()

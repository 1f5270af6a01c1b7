"""Real storage-node processes on free loopback ports, data in a temporary directory.

Imported by the tests of this folder (a unique module name: test folders are not packages)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from strom.protocol.v1 import storage_pb2_grpc
from strom_server.local.supervisor import ManagedProcess
from strom_server.rpc.health_probe import grpc_serving

STORAGE = str(Path(sys.executable).parent / "strom-storage")


@dataclass
class RunningNode:
    process: ManagedProcess
    address: str
    data_dir: Path
    argv: list[str]
    stub: storage_pb2_grpc.StorageNodeStub
    channel: grpc.Channel


@pytest.fixture
def start_node(
    tmp_path: Path, free_port: Callable[[], int]
) -> Iterator[Callable[..., RunningNode]]:
    """Start ``strom-storage`` with extra flags; every node is stopped at teardown."""
    nodes: list[RunningNode] = []

    def start(*flags: str, data_dir: Path | None = None, port: int | None = None) -> RunningNode:
        data = data_dir or tmp_path / f"node{len(nodes)}"
        address = f"127.0.0.1:{port or free_port()}"
        if "--etcd-endpoints" not in flags:
            flags = ("--etcd-endpoints", "", *flags)  # standalone unless the test gives etcd
        argv = [STORAGE, "--listen", address, "--log-dirs", str(data), *flags]
        process = ManagedProcess(
            name=f"storage-{len(nodes)}",
            argv=argv,
            log_path=tmp_path / f"storage-{len(nodes)}.log",
            ready=lambda: grpc_serving(address),
        )
        process.start()
        channel = grpc.insecure_channel(address)
        node = RunningNode(
            process, address, data, argv, storage_pb2_grpc.StorageNodeStub(channel), channel
        )
        nodes.append(node)
        process.wait_ready(30)
        return node

    yield start
    for node in nodes:
        node.channel.close()
        node.process.stop(10)

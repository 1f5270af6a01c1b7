"""The committed protocol stubs are exactly what proto/generate.py produces from proto/."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[4]
COMMITTED = REPO / "clients" / "src" / "strom" / "protocol" / "v1"


def test_committed_stubs_match_a_fresh_generation(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, str(REPO / "proto" / "generate.py"), "--out", str(tmp_path)],
        check=True,
        capture_output=True,
    )
    fresh_dir = tmp_path / "strom" / "protocol" / "v1"
    fresh = {p.name: p.read_bytes() for p in fresh_dir.iterdir() if p.is_file()}
    committed = {p.name: p.read_bytes() for p in COMMITTED.iterdir() if p.is_file()}
    stale = sorted(
        name for name in fresh.keys() | committed.keys() if fresh.get(name) != committed.get(name)
    )
    assert not stale, f"stubs differ from proto/ (run `make proto` and commit): {stale}"


def test_every_proto_file_has_stubs_and_services_have_grpc_modules() -> None:
    protos = sorted((REPO / "proto" / "strom" / "protocol" / "v1").glob("*.proto"))
    assert {p.stem for p in protos} >= {"common", "storage", "controller", "coordinator", "gateway"}
    for proto in protos:
        assert importlib.util.find_spec(f"strom.protocol.v1.{proto.stem}_pb2") is not None
        has_service = "\nservice " in proto.read_text()
        grpc_module = importlib.util.find_spec(f"strom.protocol.v1.{proto.stem}_pb2_grpc")
        assert (grpc_module is not None) == has_service, proto.name


def test_services_expose_the_rpcs_later_issues_build_on() -> None:
    from strom.protocol.v1 import (
        controller_pb2,
        coordinator_pb2,
        gateway_pb2,
        storage_pb2,
        transaction_pb2,
    )

    def methods(module: object, service: str) -> set[str]:
        return set(module.DESCRIPTOR.services_by_name[service].methods_by_name)  # type: ignore[attr-defined]

    storage = methods(storage_pb2, "StorageNode")
    assert {
        "Produce",
        "ProduceStream",
        "Fetch",
        "FetchStream",
        "ListOffsets",
        "OffsetForLeaderEpoch",
    } <= storage
    controller = methods(controller_pb2, "Controller")
    assert {
        "Metadata",
        "CreateTopics",
        "DeleteTopics",
        "AlterPartition",
        "ElectLeaders",
        "AlterPartitionReassignments",
    } <= controller
    groups = methods(coordinator_pb2, "GroupCoordinator")
    assert {
        "FindCoordinator",
        "JoinGroup",
        "SyncGroup",
        "Heartbeat",
        "LeaveGroup",
        "OffsetCommit",
        "OffsetFetch",
    } <= groups
    gateway = methods(gateway_pb2, "Gateway")
    # The gateway is the whole public API: every client-facing RPC of the other services.
    # Internal RPCs: replication, ISR changes, and the transaction coordinator's markers.
    assert (storage - {"FetchStream", "OffsetForLeaderEpoch", "WriteTxnMarkers"}) <= gateway
    assert (controller - {"AlterPartition"}) <= gateway
    assert (groups - {"WriteTxnMarkers"}) <= gateway
    transactions = methods(transaction_pb2, "TransactionCoordinator")
    assert {"InitProducerId", "AddPartitionsToTxn", "AddOffsetsToTxn", "EndTxn"} <= transactions
    assert transactions <= gateway
    assert {"ProduceRecords", "FetchRecords"} <= gateway


def test_record_data_travels_as_bytes() -> None:
    """Design rule 3: batches are opaque bytes fields, never per-record messages."""
    from google.protobuf.descriptor import FieldDescriptor

    from strom.protocol.v1 import storage_pb2

    for message in ("ProducePartitionData", "FetchPartitionResult"):
        field = storage_pb2.DESCRIPTOR.message_types_by_name[message].fields_by_name["records"]
        assert field.type == FieldDescriptor.TYPE_BYTES

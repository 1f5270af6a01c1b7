"""The Node.js client (clients/node) against a real cluster, through the gateway only: it
creates a topic, produces through ProduceRecords and through a batch its own JS encoder built,
and consumes; the Python client then reads the same records. ``make test`` installs the Node
dependencies (``npm ci``) first."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from cluster_testkit import LocalCluster

from strom import Consumer
from strom.records import encode_batch
from strom.types import TopicPartition

NODE_DIR = Path(__file__).resolve().parents[3] / "clients" / "node"

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")


def node(*args: str, timeout_s: float = 60) -> str:
    if not (NODE_DIR / "node_modules" / "@grpc" / "grpc-js").is_dir():
        pytest.fail(f"run `npm ci` in {NODE_DIR} first (make test does)")
    done = subprocess.run(
        ["node", *args], cwd=NODE_DIR, capture_output=True, text=True, timeout=timeout_s
    )
    assert done.returncode == 0, f"node {' '.join(args)} failed:\n{done.stderr}{done.stdout}"
    return done.stdout


def test_node_unit_tests_pass() -> None:
    node("--test", "test/")


def test_the_js_encoder_writes_the_python_encoders_bytes() -> None:
    script = (
        "const {encodeBatch} = require('./src/record_batch');"
        "process.stdout.write(encodeBatch(["
        "{key: 'k', value: 'v', timestampMs: 1700000000000, headers: [{key: 'h', value: 'x'}]},"
        "{key: null, value: null, timestampMs: 1700000000005},"
        "{key: '', value: 'ü', timestampMs: 1699999999999, headers: [{key: 'n', value: null}]},"
        "]).toString('hex'))"
    )
    expected = encode_batch(
        [
            (1_700_000_000_000, b"k", b"v", [("h", b"x")]),
            (1_700_000_000_005, None, None),
            (1_699_999_999_999, b"", "ü".encode(), [("n", None)]),
        ]
    )
    assert bytes.fromhex(node("-e", script)) == expected


def test_node_produces_and_consumes_through_the_gateway(cluster: LocalCluster) -> None:
    topic = "node-quickstart"
    out = json.loads(node("examples/quickstart.js", cluster.gateway, topic).strip())
    assert out["produced"] == {"records": 0, "batch": 2}
    assert [r["value"] for r in out["fetched"]] == [
        "hello from node",
        "second",
        "batch record 1",
        "batch record 2",
    ]
    assert out["fetched"][0]["headers"] == [["lang", "js"]]
    assert out["fetched"][1]["headers"] == [["nothing", None]]
    assert out["fetched"][3]["key"] is None
    assert out["raw"] == [
        {"offset": 2, "value": "batch record 1"},
        {"offset": 3, "value": "batch record 2"},
    ]
    assert out["next_offset"] == 4

    with Consumer(
        bootstrap_servers=cluster.gateway, auto_offset_reset="earliest", consumer_timeout_ms=10000
    ) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        records = []
        for record in consumer:
            records.append(record)
            if len(records) == 4:
                break
    assert [(r.key, r.value) for r in records] == [
        (b"k1", b"hello from node"),
        (b"k1", b"second"),
        (b"k2", b"batch record 1"),
        (None, b"batch record 2"),
    ]
    assert [tuple(h) for h in records[0].headers] == [("lang", b"js")]
    assert records[2].timestamp == 1_700_000_000_000

"""``strom perf produce|consume|e2e`` as subprocesses against a real cluster: the output's
shape, counts that match what was asked and what the cluster holds, ordered percentiles, JSON
that parses, Ctrl-C, and one-line errors. Small runs; no timing is asserted."""

from __future__ import annotations

import json
import re
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from cluster_testkit import (
    STROM,
    CliResult,
    LocalCluster,
    assert_ok,
    assert_one_line_error,
    run_strom,
)
from strom_testkit import free_port, wait_until

from strom import Consumer, NewTopic, Producer, TopicPartition

pytestmark = pytest.mark.integration

PARTITIONS = 3
NUMBER = r"(\d+(?:\.\d+)?)"
PRODUCE_PROGRESS = re.compile(
    rf"^(\d+) records sent, {NUMBER} records/sec \({NUMBER} MB/sec\), {NUMBER} ms avg latency, "
    rf"{NUMBER} ms max latency\.$"
)
PRODUCE_SUMMARY = re.compile(
    rf"^(\d+) records sent, {NUMBER} records/sec \({NUMBER} MB/sec\), {NUMBER} ms avg latency, "
    rf"{NUMBER} ms max latency, {NUMBER} ms 50th, {NUMBER} ms 95th, {NUMBER} ms 99th, "
    rf"{NUMBER} ms 99\.9th\.$"
)
CONSUME_PROGRESS = re.compile(
    rf"^(\d+) records consumed, {NUMBER} records/sec \({NUMBER} MB/sec\)\.$"
)
CONSUME_SUMMARY = re.compile(
    rf"^(\d+) records consumed \({NUMBER} MB\) in {NUMBER} s, {NUMBER} records/sec "
    rf"\({NUMBER} MB/sec\); rebalance time (\d+) ms, fetch time (\d+) ms "
    rf"\({NUMBER} records/sec, {NUMBER} MB/sec\)\.$"
)
E2E_PROGRESS = re.compile(
    rf"^(\d+) records received, {NUMBER} records/sec, {NUMBER} ms avg latency, "
    rf"{NUMBER} ms max latency\.$"
)
E2E_SUMMARY = re.compile(
    rf"^(\d+) records sent at {NUMBER} records/sec, (\d+) received; end-to-end latency "
    rf"{NUMBER} ms avg, {NUMBER} ms 50th, {NUMBER} ms 95th, {NUMBER} ms 99th, "
    rf"{NUMBER} ms 99\.9th, {NUMBER} ms max \(acknowledged: {NUMBER} ms 50th, "
    rf"{NUMBER} ms 99th\)\.$"
)
LATENCY_FIELDS = ("p50_ms", "p95_ms", "p99_ms", "p999_ms", "max_latency_ms")


def perf(cluster: LocalCluster, *args: str, timeout_s: float = 120) -> CliResult:
    return cluster.strom("perf", *args, timeout_s=timeout_s)


def json_lines(result: CliResult) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(progress objects, the summary object) of a --json run; every line is JSON."""
    objects = [json.loads(line) for line in result.stdout.splitlines()]
    assert objects and objects[-1]["type"] == "summary", result.explain()
    assert all(o["type"] == "progress" for o in objects[:-1]), result.explain()
    return objects[:-1], objects[-1]


def assert_ordered(figures: dict[str, Any]) -> None:
    values = [figures[name] for name in LATENCY_FIELDS]
    assert values[0] >= 0, figures
    assert values == sorted(values), figures
    assert figures["avg_latency_ms"] <= figures["max_latency_ms"], figures


def end_total(cluster: LocalCluster, topic: str) -> int:
    with Consumer(bootstrap_servers=cluster.gateway) as consumer:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        return sum(consumer.end_offsets(tps).values())


def new_topic(cluster: LocalCluster, name: str, replication: int = 3) -> str:
    with cluster.admin() as admin:
        admin.create_topics([NewTopic(name, PARTITIONS, replication)])
    wait_until(lambda: all(p.leader > 0 for p in cluster.describe(name).partitions), 20, "leaders")
    return name


@pytest.fixture(scope="module")
def filled(cluster: LocalCluster) -> str:
    """A topic holding 3,000 records of 100 bytes."""
    topic = new_topic(cluster, "perf-filled")
    with Producer(cluster.gateway) as producer:
        for i in range(3000):
            producer.send(topic, f"{i:0100d}".encode())
        producer.flush()
    assert end_total(cluster, topic) == 3000
    return topic


# -- produce --------------------------------------------------------------------------------------


def test_produce_text_progress_and_summary(cluster: LocalCluster) -> None:
    topic = new_topic(cluster, "perf-produce")
    result = assert_ok(
        perf(
            cluster, "produce", "--topic", topic, "--num-records", "3000", "--record-size",
            "100", "--throughput", "3000", "--reporting-interval-ms", "200",
        )
    )  # fmt: skip
    *progress, summary = result.stdout.splitlines()
    assert progress, result.explain()  # ~1 s of sending at 3,000/s, a line every 200 ms
    acknowledged = 0
    for line in progress:
        match = PRODUCE_PROGRESS.match(line)
        assert match, line
        acknowledged += int(match.group(1))
        assert float(match.group(4)) <= float(match.group(5)), line  # avg <= max
    assert acknowledged <= 3000
    match = PRODUCE_SUMMARY.match(summary)
    assert match, summary
    records, _rate, _mb, avg, high, p50, p95, p99, p999 = match.groups()
    assert int(records) == 3000
    assert float(p50) <= float(p95) <= float(p99) <= float(p999) <= float(high)
    assert float(avg) <= float(high)
    assert end_total(cluster, topic) == 3000  # every record written once


def test_produce_json_payload_file_and_properties(cluster: LocalCluster, tmp_path: Path) -> None:
    topic = new_topic(cluster, "perf-payloads", replication=1)
    payloads = [b"alpha", b"bravo-bravo", b"charlie-charlie-charlie"]
    source = tmp_path / "payloads.txt"
    source.write_bytes(b"|".join(payloads) + b"|")  # a trailing delimiter: no empty payload
    result = assert_ok(
        perf(
            cluster, "produce", "--topic", topic, "--num-records", "2000", "--payload-file",
            str(source), "--payload-delimiter", "|", "--json",
            "--producer-property", "acks=1", "--producer-property", "linger.ms=0",
            "--producer-props", "compression.type=none", "batch.size=1024",
            "enable.idempotence=false", "max.in.flight.requests.per.connection=1",
        )
    )  # fmt: skip
    progress, summary = json_lines(result)
    for line in progress:
        assert set(line) == {
            "type", "records", "records_per_sec", "mb_per_sec", "avg_latency_ms",
            "max_latency_ms",
        }  # fmt: skip
    assert summary["records"] == summary["sent"] == 2000 and summary["failed"] == 0
    assert 2000 * 5 <= summary["bytes"] <= 2000 * 23
    assert_ordered(summary)
    with Consumer(bootstrap_servers=cluster.gateway, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        values: list[bytes] = []
        while len(values) < 2000:
            for records in consumer.poll(timeout_ms=5000).values():
                values += [r.value for r in records]
    assert len(values) == 2000 and set(values) <= set(payloads)
    assert sum(map(len, values)) == summary["bytes"]


def test_produce_ctrl_c_reports_what_was_sent(cluster: LocalCluster) -> None:
    topic = new_topic(cluster, "perf-interrupted", replication=1)
    argv = [
        STROM, "perf", "produce", "--topic", topic, "--num-records", "1000000", "--record-size",
        "50", "--throughput", "500", "--reporting-interval-ms", "200", "--json",
        "--bootstrap-server", cluster.gateway,
    ]  # fmt: skip
    process = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()  # a progress line: it is sending
        assert json.loads(first)["type"] == "progress", first
        process.send_signal(signal.SIGINT)
        rest, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 130, (rest, err)
    assert "Traceback" not in err, err
    summary = json.loads(rest.splitlines()[-1])
    assert summary["type"] == "summary"
    assert 0 < summary["records"] <= summary["sent"] < 1000000
    assert end_total(cluster, topic) == summary["records"]


# -- consume --------------------------------------------------------------------------------------


def test_consume_assigned_text(cluster: LocalCluster, filled: str) -> None:
    result = assert_ok(
        perf(cluster, "consume", "--topic", filled, "--messages", "3000", "--from-earliest")
    )
    *progress, summary = result.stdout.splitlines()
    for line in progress:
        assert CONSUME_PROGRESS.match(line), line
    match = CONSUME_SUMMARY.match(summary)
    assert match, summary
    records, mb, *_rates, rebalance, _fetch, _frate, _fmb = match.groups()
    assert int(records) == 3000
    assert float(mb) == pytest.approx(3000 * 100 / 2**20, abs=0.005)
    assert int(rebalance) == 0  # no group: nothing to join


def test_consume_group_json(cluster: LocalCluster, filled: str) -> None:
    result = assert_ok(
        perf(
            cluster, "consume", "--topic", filled, "--messages", "2500", "--group", "perf-group",
            "--json", "--reporting-interval-ms", "100",
        )
    )  # fmt: skip
    progress, summary = json_lines(result)
    assert summary["records"] == 2500 and summary["bytes"] == 2500 * 100
    assert summary["rebalance_time_ms"] > 0  # joining the group takes a round
    assert summary["fetch_time_ms"] == pytest.approx(
        summary["elapsed_s"] * 1000 - summary["rebalance_time_ms"], abs=1
    )
    assert sum(line["records"] for line in progress) <= 2500
    with cluster.admin() as admin:  # auto-commit: the group committed what it read
        committed = admin.list_consumer_group_offsets("perf-group")
    assert sum(o.offset for o in committed.values()) == 2500


def test_consume_from_latest_times_out(cluster: LocalCluster, filled: str) -> None:
    result = perf(
        cluster, "consume", "--topic", filled, "--messages", "10", "--from-latest",
        "--timeout-ms", "1000", "--json",
    )  # fmt: skip
    assert result.returncode == 1, result.explain()
    assert result.stderr.strip().splitlines() == [
        "strom: error: no record for 1000 ms: 0 of 10 records consumed"
    ], result.explain()
    _progress, summary = json_lines(result)
    assert summary["records"] == 0


# -- e2e ------------------------------------------------------------------------------------------


def test_e2e_json(cluster: LocalCluster) -> None:
    topic = new_topic(cluster, "perf-e2e")
    before = end_total(cluster, topic)
    result = assert_ok(
        perf(
            cluster, "e2e", "--topic", topic, "--num-records", "2000", "--throughput", "1000",
            "--acks", "all", "--record-size", "64", "--reporting-interval-ms", "500", "--json",
        )
    )  # fmt: skip
    progress, summary = json_lines(result)
    assert progress, result.explain()
    assert summary["sent"] == summary["received"] == 2000 and summary["failed"] == 0
    assert_ordered(summary)
    assert 0 < summary["ack_p50_ms"] <= summary["ack_p99_ms"]
    assert sum(line["records"] for line in progress) <= 2000
    # the 2,000 records and one warm-up record per partition
    assert end_total(cluster, topic) - before == 2000 + PARTITIONS


def test_e2e_duration_text(cluster: LocalCluster) -> None:
    topic = new_topic(cluster, "perf-e2e-text", replication=1)
    result = assert_ok(
        perf(
            cluster, "e2e", "--topic", topic, "--duration", "1", "--throughput", "2000",
            "--acks", "1", "--reporting-interval-ms", "300",
        )
    )  # fmt: skip
    *progress, summary = result.stdout.splitlines()
    for line in progress:
        assert E2E_PROGRESS.match(line), line
    match = E2E_SUMMARY.match(summary)
    assert match, summary
    sent, _rate, received, _avg, p50, p95, p99, p999, high, ack50, ack99 = match.groups()
    assert int(sent) == int(received) == 2000  # a paced run: throughput x duration records
    assert float(p50) <= float(p95) <= float(p99) <= float(p999) <= float(high)
    assert float(ack50) <= float(ack99)


# -- errors ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["produce", "--topic", "no-such-topic", "--num-records", "10", "--record-size", "10"],
         ["no-such-topic"]),
        (["consume", "--topic", "no-such-topic", "--messages", "10"], ["no-such-topic"]),
        (["e2e", "--topic", "no-such-topic", "--num-records", "10"], ["no-such-topic"]),
        (["produce", "--topic", "perf-filled", "--num-records", "0", "--record-size", "10"],
         ["--num-records", "> 0"]),
        (["produce", "--topic", "perf-filled", "--num-records", "5", "--record-size", "-1"],
         ["--record-size", "> 0"]),
        (["produce", "--topic", "perf-filled", "--num-records", "5", "--record-size", "9",
          "--throughput", "0"], ["--throughput"]),
        (["consume", "--topic", "perf-filled", "--messages", "-5"], ["--messages", "> 0"]),
        (["e2e", "--topic", "perf-filled", "--duration", "0"], ["--duration", "> 0"]),
        (["e2e", "--topic", "perf-filled", "--num-records", "5", "--record-size", "8"],
         ["--record-size", ">= 16"]),
        (["produce", "--topic", "perf-filled", "--num-records", "5", "--record-size", "9",
          "--producer-property", "no.such.setting=1"], ["unknown producer property",
                                                         "no.such.setting"]),
        (["produce", "--topic", "perf-filled", "--num-records", "5", "--record-size", "9",
          "--producer-property", "key.serializer=x"], ["key.serializer"]),
        (["produce", "--topic", "perf-filled", "--num-records", "5", "--record-size", "9",
          "--producer-property", "linger.ms=soon"], ["linger.ms", "'soon'"]),
        (["produce", "--topic", "perf-filled", "--num-records", "5", "--record-size", "9",
          "--producer-props", "acks=1", "batch.size=0"], ["batch.size"]),
        (["e2e", "--topic", "perf-filled", "--num-records", "5",
          "--producer-property", "acks"], ["NAME=VALUE", "'acks'"]),
        (["produce", "--topic", "perf-filled", "--num-records", "5", "--payload-file",
          "/no/such/file"], ["/no/such/file"]),
    ],
)  # fmt: skip
def test_bad_input_is_one_line(
    cluster: LocalCluster, filled: str, args: list[str], fragments: list[str]
) -> None:
    assert_one_line_error(perf(cluster, *args), *fragments)


def test_empty_payload_file(cluster: LocalCluster, filled: str, tmp_path: Path) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    result = perf(
        cluster, "produce", "--topic", filled, "--num-records", "5", "--payload-file", str(empty)
    )
    assert_one_line_error(result, str(empty), "no payload")


@pytest.mark.parametrize(
    "args",
    [
        ["produce", "--topic", "t", "--num-records", "5", "--record-size", "5"],
        ["consume", "--topic", "t", "--messages", "5"],
        ["e2e", "--topic", "t", "--num-records", "5"],
    ],
)
def test_unreachable_cluster(args: list[str]) -> None:
    nobody = f"127.0.0.1:{free_port()}"
    result = run_strom("perf", *args, "--bootstrap-server", nobody, timeout_s=60)
    assert_one_line_error(result, nobody, "UNAVAILABLE")

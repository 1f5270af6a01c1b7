"""``strom produce`` and ``strom consume`` end to end, as subprocesses against a real cluster."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest
from cluster_testkit import STROM, CliResult, LocalCluster, assert_ok, assert_one_line_error
from strom_testkit import wait_until

from strom import Consumer, NewTopic, Producer, TopicPartition

pytestmark = pytest.mark.integration


def strom(cluster: LocalCluster, *args: str, stdin: str = "", timeout_s: float = 60) -> CliResult:
    argv = [*args, "--bootstrap-server", cluster.gateway]
    done = subprocess.run(
        [STROM, *argv], input=stdin, capture_output=True, text=True, timeout=timeout_s
    )
    return CliResult(tuple(argv), done.returncode, done.stdout, done.stderr)


@pytest.fixture(scope="module")
def topic(cluster: LocalCluster) -> str:
    with cluster.admin() as admin:
        admin.create_topics([NewTopic("console", 2, 1)])
    wait_until(
        lambda: all(p.leader > 0 for p in cluster.describe("console").partitions), 20, "leaders"
    )
    return "console"


def test_produce_keys_and_headers_then_consume_json(cluster: LocalCluster, topic: str) -> None:
    lines = "".join(f"k{i}:value {i}\n" for i in range(10))
    assert_ok(
        strom(
            cluster,
            "produce",
            topic,
            "--key-separator",
            ":",
            "--header",
            "source=test",
            "--header",
            "n=1",
            "--partition",
            "0",
            stdin=lines,
        )
    )
    result = assert_ok(
        strom(
            cluster,
            "consume",
            topic,
            "--from-beginning",
            "--partition",
            "0",
            "--max-messages",
            "10",
            "--format",
            "json",
            "--print-key",
            "--print-headers",
            "--print-offset",
            "--print-timestamp",
        )
    )
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["value"] for r in records] == [f"value {i}" for i in range(10)]
    assert [r["key"] for r in records] == [f"k{i}" for i in range(10)]
    assert [r["offset"] for r in records] == list(range(10))
    assert all(r["partition"] == 0 for r in records)
    assert records[0]["headers"] == [["source", "test"], ["n", "1"]]
    assert records[0]["timestamp"] > 0 and records[0]["timestamp_type"] == "CreateTime"


def test_produce_file_with_progress_then_consume_text_and_hex(
    cluster: LocalCluster, topic: str, tmp_path: Path
) -> None:
    data = tmp_path / "lines.txt"
    data.write_text("".join(f"line {i}\n" for i in range(20)))
    result = assert_ok(
        strom(cluster, "produce", topic, "--file", str(data), "--partition", "1", "--rate", "200")
    )
    assert "100.0%" in result.stderr and "20 records" in result.stderr
    text = assert_ok(
        strom(
            cluster,
            "consume",
            topic,
            "--partition",
            "1",
            "--offset",
            "5",
            "--max-messages",
            "3",
            "--print-offset",
        )
    )
    assert text.stdout.splitlines() == [f"Partition:1\tOffset:{i}\tline {i}" for i in range(5, 8)]
    hexed = assert_ok(
        strom(
            cluster,
            "consume",
            topic,
            "--partition",
            "1",
            "--offset",
            "0",
            "--max-messages",
            "1",
            "--format",
            "hex",
            "--print-key",
        )
    )
    assert hexed.stdout == f"null\t{b'line 0'.hex()}\n"


def test_consume_every_partition_until_idle(cluster: LocalCluster, topic: str) -> None:
    assert_ok(strom(cluster, "produce", topic, stdin="a\nb\nc\n"))
    result = assert_ok(
        strom(cluster, "consume", topic, "--from-beginning", "--idle-timeout-ms", "1500")
    )
    assert {"a", "b", "c"} <= set(result.stdout.splitlines())


def test_produce_with_acks_1(cluster: LocalCluster) -> None:
    """--acks 1 turns the default idempotence off instead of failing on it."""
    with cluster.admin() as admin:
        admin.create_topics([NewTopic("console-acks1", 1, 1)])
    for acks in ("1", "0"):
        assert_ok(strom(cluster, "produce", "console-acks1", "--acks", acks, stdin="x\ny\n"))
    result = assert_ok(
        strom(cluster, "consume", "console-acks1", "--partition", "0", "--offset", "0",
              "--max-messages", "4")
    )  # fmt: skip
    assert result.stdout.splitlines() == ["x", "y", "x", "y"]


def test_consume_with_a_group_resumes_after_its_commit(cluster: LocalCluster) -> None:
    with cluster.admin() as admin:
        admin.create_topics([NewTopic("console-group", 1, 1)])
    assert_ok(strom(cluster, "produce", "console-group", stdin="g1\ng2\ng3\n"))
    group = ("--group", "console-g", "--from-beginning")
    first = assert_ok(strom(cluster, "consume", "console-group", *group, "--max-messages", "3"))
    assert first.stdout.splitlines() == ["g1", "g2", "g3"]
    assert_ok(strom(cluster, "produce", "console-group", stdin="g4\n"))
    second = assert_ok(strom(cluster, "consume", "console-group", *group, "--max-messages", "1"))
    assert second.stdout.splitlines() == ["g4"]  # from the committed offset, not the beginning


def produce_numbered(cluster: LocalCluster, topic: str, partitions: int, count: int) -> list[str]:
    """Create ``topic`` and write ``count`` numbered records across its partitions."""
    with cluster.admin() as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    values = [f"{topic}-{i}" for i in range(count)]
    with Producer(cluster.gateway) as producer:
        share = -(-count // partitions)
        for p in range(partitions):
            chunk = [v.encode() for v in values[p * share : (p + 1) * share]]
            assert producer.send_many(topic, chunk, partition=p).result(60) == len(chunk)
    return values


def test_group_idle_timeout_starts_after_the_join(cluster: LocalCluster) -> None:
    """The papercut: a new group's first rebalance waits group.initial.rebalance.delay.ms
    (3 s by default) for more members; a 3 s idle clock running during the join ended the
    command before a single record arrived."""
    values = produce_numbered(cluster, "console-idle", 3, 100_000)
    result = assert_ok(
        strom(cluster, "consume", "console-idle", "--group", "console-idle-g",
              "--from-beginning", "--idle-timeout-ms", "3000", timeout_s=120)
    )  # fmt: skip
    lines = result.stdout.splitlines()
    assert len(lines) == len(values) and set(lines) == set(values)


def test_group_idle_timeout_waits_for_a_slow_rebalance(cluster: LocalCluster) -> None:
    """A group with a member slow to rejoin: the rebalance the command's join starts lasts
    until that member polls again (about 8 s, well past the 3 s idle timeout); the command
    still reads every record once it is assigned its partitions, then exits when idle."""
    values = produce_numbered(cluster, "console-slow", 2, 1000)
    with cluster.admin() as admin:
        admin.create_topics([NewTopic("console-slow-other", 1, 1)])
    member = Consumer(bootstrap_servers=cluster.gateway, group_id="console-slow-g")
    try:
        member.subscribe(["console-slow-other"])
        wait_until(lambda: bool(member.poll(100) or member.assignment()), 30, "the first join")
        argv = ["consume", "console-slow", "--group", "console-slow-g", "--from-beginning",
                "--idle-timeout-ms", "3000", "--bootstrap-server", cluster.gateway]  # fmt: skip
        consume = subprocess.Popen(
            [STROM, *argv],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            time.sleep(8)  # the member does not poll: the rebalance waits for it
            assert consume.poll() is None, "the command gave up during the rebalance"
            deadline = time.monotonic() + 60
            while consume.poll() is None and time.monotonic() < deadline:
                member.poll(200)  # rejoins, then stays in the group
            out, err = consume.communicate(timeout=10)
        finally:
            if consume.poll() is None:
                consume.kill()
                consume.wait()
        assert consume.returncode == 0, err
        assert member.assignment() == {TopicPartition("console-slow-other", 0)}
    finally:
        member.close()
    lines = out.splitlines()
    assert len(lines) == len(values) and set(lines) == set(values)


def test_errors_are_one_line(cluster: LocalCluster, topic: str) -> None:
    assert_one_line_error(strom(cluster, "consume", "no-such-topic"), "no-such-topic")
    assert_one_line_error(
        strom(cluster, "produce", topic, "--key-separator", ":", stdin="nokey\n"),
        "line 1 has no key separator",
    )
    assert_one_line_error(strom(cluster, "consume", topic, "--partition", "7"), "no partition 7")


def test_ctrl_c_exits_130_without_traceback(cluster: LocalCluster, topic: str) -> None:
    assert_ok(strom(cluster, "produce", topic, "--partition", "0", stdin="first\n"))
    consume = subprocess.Popen(
        [STROM, "consume", topic, "--from-beginning", "--bootstrap-server", cluster.gateway],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    produce = subprocess.Popen(
        [STROM, "produce", topic, "--bootstrap-server", cluster.gateway],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert consume.stdout is not None and produce.stdin is not None
        consume.stdout.readline()  # it is reading: one record printed
        produce.stdin.write("sent before ctrl-c\n")
        produce.stdin.flush()
        # Both are running (not still starting up) once the consumer prints that record.
        while consume.stdout.readline() != "sent before ctrl-c\n":
            pass
        for process in (consume, produce):
            process.send_signal(signal.SIGINT)
        for process in (consume, produce):
            _, err = process.communicate(timeout=30)
            assert process.returncode == 130, err
            assert "Traceback" not in err, err
    finally:
        for process in (consume, produce):
            if process.poll() is None:
                process.kill()
                process.wait()


def test_consume_ends_quietly_when_its_reader_goes_away(cluster: LocalCluster, topic: str) -> None:
    assert_ok(strom(cluster, "produce", topic, "--partition", "0", stdin="one\n"))
    consume = subprocess.Popen(
        [STROM, "consume", topic, "--from-beginning", "--bootstrap-server", cluster.gateway],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert consume.stdout is not None and consume.stderr is not None
        consume.stdout.readline()
        consume.stdout.close()  # as `| head -1` does
        for _ in range(20):  # its next writes fail
            assert_ok(strom(cluster, "produce", topic, "--partition", "0", stdin="more\n"))
            if consume.poll() is not None:
                break
        assert consume.wait(timeout=30) == 0
        err = consume.stderr.read()
        assert err == "", err
    finally:
        if consume.poll() is None:
            consume.kill()
            consume.wait()


def test_consume_escapes_control_characters_unless_raw(cluster: LocalCluster) -> None:
    """A value holding terminal escape sequences is printed escaped (text and JSON), as
    dump-log does; ``--raw`` prints it as it is, for a pipe."""
    with cluster.admin() as admin:
        admin.create_topics([NewTopic("console-esc", 1, 1)])
    hostile = "\x1b[2J\x1b]0;owned\x07\u202eend\n".encode()
    with Producer(bootstrap_servers=cluster.gateway) as producer:
        producer.send(
            "console-esc", hostile, key=b"k\x1b", headers=[("h\x1b", b"\x9b31m")], partition=0
        ).result(timeout=30)
    common = ("console-esc", "--from-beginning", "--max-messages", "1", "--print-key")
    text = assert_ok(strom(cluster, "consume", *common, "--print-headers"))
    assert text.stdout == ("k\\x1b\th\\x1b:\\x9b31m\t\\x1b[2J\\x1b]0;owned\\x07\\u202eend\\n\n"), (
        text.stdout
    )
    as_json = assert_ok(strom(cluster, "consume", *common, "--format", "json"))
    line = as_json.stdout.rstrip("\n")
    assert line.isprintable(), line
    assert json.loads(line) == {"key": "k\x1b", "value": hostile.decode()}
    raw = assert_ok(strom(cluster, "consume", *common, "--raw"))
    assert raw.stdout == "k\x1b\t" + hostile.decode() + "\n"


def test_group_idle_timeout_ends_without_a_reachable_coordinator(cluster: LocalCluster) -> None:
    """With the group coordinator down there is no join to wait for: --idle-timeout-ms ends
    the command (it waited forever for an assignment). Last in the module: it stops the
    coordinator, then restarts it."""
    with cluster.admin() as admin:
        admin.create_topics([NewTopic("console-nocoord", 1, 1)])
    cluster.stop("coordinator-1")
    try:
        started = time.monotonic()
        result = assert_ok(
            strom(cluster, "consume", "console-nocoord", "--group", "console-nocoord-g",
                  "--idle-timeout-ms", "2000", timeout_s=60)
        )  # fmt: skip
        assert result.stdout == ""
        assert time.monotonic() - started < 30
    finally:
        cluster.restart("coordinator-1")

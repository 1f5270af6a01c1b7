"""The strom data source's option parsing (no Spark, no cluster)."""

from __future__ import annotations

import pytest

from strom.types import TopicPartition
from strom_spark.options import EARLIEST, LATEST, parse_sink_options, parse_source_options

BASE = {"strom.bootstrap.servers": "localhost:9092"}


def source(streaming: bool = False, **options: str):  # type: ignore[no-untyped-def]
    return parse_source_options({**BASE, **options}, streaming=streaming)


def test_defaults_follow_sparks_kafka_source() -> None:
    batch = source(subscribe="a, b")
    assert batch.subscribe == ("a", "b")
    assert (batch.starting.kind, batch.ending.kind) == ("earliest", "latest")
    assert batch.fail_on_data_loss and not batch.include_headers
    stream = source(streaming=True, subscribePattern="ev.*")
    assert stream.starting.kind == "latest"
    assert stream.max_offsets_per_trigger is None


def test_option_names_are_case_insensitive() -> None:
    opts = source(SUBSCRIBE="a", FailOnDataLoss="FALSE", maxoffsetspertrigger="10")
    assert opts.subscribe == ("a",) and not opts.fail_on_data_loss
    assert opts.max_offsets_per_trigger == 10


def test_json_offsets_assign_and_timestamps() -> None:
    opts = source(
        assign='{"a": [1, 0], "b": [2]}',
        startingOffsets='{"a": {"0": 5, "1": -2}}',
        endingOffsets='{"a": {"0": -1}}',
    )
    assert opts.assign == (TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 2))
    assert opts.starting.offsets == {TopicPartition("a", 0): 5, TopicPartition("a", 1): EARLIEST}
    assert opts.starting.default == EARLIEST and opts.ending.default == LATEST
    assert opts.ending.offsets == {TopicPartition("a", 0): LATEST}
    # Timestamps take precedence over offsets, a single timestamp over per-partition ones.
    opts = source(
        subscribe="a", startingOffsets="earliest", startingOffsetsByTimestamp='{"a": {"0": 7}}'
    )
    assert opts.starting.kind == "timestamps" and opts.starting.offsets == {
        TopicPartition("a", 0): 7
    }
    opts = source(
        subscribe="a", startingTimestamp="9", startingOffsetsByTimestamp='{"a": {"0": 7}}'
    )
    assert (opts.starting.kind, opts.starting.timestamp, opts.starting.no_match) == (
        "timestamp",
        9,
        "error",
    )
    opts = source(subscribe="a", startingTimestamp="9", startingOffsetsByTimestampStrategy="latest")
    assert opts.starting.no_match == "latest"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "exactly one of the options subscribe, subscribePattern, assign"),
        ({"subscribe": "a", "assign": '{"a": [0]}'}, "got subscribe, assign"),
        ({"subscribe": " , "}, "at least one topic"),
        ({"subscribePattern": "("}, "not a valid regex"),
        ({"assign": '{"a": [-1]}'}, "list of partition numbers"),
        ({"assign": "[1]"}, "JSON object"),
        ({"subscribe": "a", "startingOffsets": "latest"}, "not allowed for a batch query"),
        ({"subscribe": "a", "startingOffsets": '{"a": {"0": -1}}'}, "-1 (latest) is not allowed"),
        ({"subscribe": "a", "endingOffsets": "earliest"}, "endingOffsets=earliest"),
        ({"subscribe": "a", "endingOffsets": '{"a": {"0": -2}}'}, "-2 (earliest) is not allowed"),
        ({"subscribe": "a", "startingOffsets": '{"a": {"x": 1}}'}, "'x' is not a partition"),
        ({"subscribe": "a", "startingOffsets": "{nope"}, "not valid JSON"),
        ({"subscribe": "a", "minPartitions": "0"}, "minPartitions must be >= 1"),
        ({"subscribe": "a", "maxRecordsPerPartition": "x"}, "must be an integer"),
        ({"subscribe": "a", "failOnDataLoss": "yes"}, "true or false"),
        ({"subscribe": "a", "startingOffsetsByTimestampStrategy": "x"}, "error or latest"),
    ],
)
def test_bad_options_name_the_option(options: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        source(**options)


def test_streaming_rejects_ending_offsets_and_needs_bootstrap() -> None:
    with pytest.raises(ValueError, match="ending offsets are not allowed"):
        source(streaming=True, subscribe="a", endingOffsets="latest")
    with pytest.raises(ValueError, match=r"strom\.bootstrap\.servers is required"):
        parse_source_options({"subscribe": "a"}, streaming=False)


def test_sink_options() -> None:
    opts = parse_sink_options(
        {**BASE, "topic": "out", "strom.linger.ms": "20", "strom.compression.type": "zstd"}
    )
    assert opts.topic == "out"
    assert opts.producer == {"linger_ms": 20, "compression_type": "zstd"}
    with pytest.raises(ValueError, match="fixed by the connector"):
        parse_sink_options({**BASE, "strom.acks": "1"})

"""The exactly-once sink's options and transactional ids (no Spark, no cluster)."""

from __future__ import annotations

import re

import pytest

from strom_spark import exactly_once
from strom_spark.options import EXACTLY_ONCE, parse_sink_options

BASE = {"strom.bootstrap.servers": "localhost:9092", "topic": "out"}
EOS = {**BASE, "deliveryGuarantee": "exactly_once"}


def test_default_is_at_least_once() -> None:
    opts = parse_sink_options(BASE)
    assert not opts.exactly_once
    assert parse_sink_options(BASE, streaming=True).delivery_guarantee == "at_least_once"


def test_exactly_once_batch_defaults() -> None:
    opts = parse_sink_options({**BASE, "DELIVERYGUARANTEE": " Exactly_Once "})
    assert opts.exactly_once and opts.delivery_guarantee == EXACTLY_ONCE
    assert opts.transactional_id_prefix == "strom-spark"
    assert opts.transaction_timeout_ms == 900_000
    opts = parse_sink_options(
        {**EOS, "transactionalIdPrefix": "etl.daily", "transactionTimeoutMs": "120000"},
        streaming=True,
    )
    assert (opts.transactional_id_prefix, opts.transaction_timeout_ms) == ("etl.daily", 120_000)


@pytest.mark.parametrize(
    ("options", "streaming", "message"),
    [
        ({**BASE, "deliveryGuarantee": "exactly-once"}, False, "must be at_least_once or"),
        (EOS, True, "transactionalIdPrefix is required for a streaming write"),
        ({**EOS, "transactionalIdPrefix": "a b"}, False, "letters, digits"),
        ({**EOS, "transactionalIdPrefix": ""}, False, "letters, digits"),
        ({**EOS, "transactionalIdPrefix": "x" * 129}, False, "1-128 characters"),
        ({**EOS, "transactionTimeoutMs": "0"}, False, "transactionTimeoutMs must be >= 1"),
        ({**EOS, "transactionTimeoutMs": "soon"}, False, "must be an integer"),
        ({**BASE, "transactionalIdPrefix": "p"}, False, "applies only to deliveryGuarantee"),
        ({**BASE, "transactionTimeoutMs": "1000"}, True, "applies only to deliveryGuarantee"),
        ({**EOS, "strom.transactional.id": "t"}, False, "set by the connector"),
    ],
)
def test_bad_values_are_named(options: dict[str, str], streaming: bool, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_sink_options(options, streaming=streaming)


def test_ids_of_one_prefix_never_match_another() -> None:
    run = exactly_once.new_run_token()
    mine = exactly_once._streaming_pattern("orders")
    other = exactly_once.streaming_task_id("orders-eu", "3", run, 0, 7)
    longer = exactly_once.streaming_task_id("orders-3", "3", run, 0, 7)
    assert mine.fullmatch(exactly_once.streaming_task_id("orders", "12", run, 2, 9))
    assert mine.fullmatch(exactly_once.streaming_task_id("orders", None, run, 2, 9))
    assert not mine.fullmatch(other) and not mine.fullmatch(longer)
    write = exactly_once.new_write_id()
    tid = exactly_once.write_task_id("strom-spark", write, 3, 41)
    assert tid == f"strom-spark-{write}-3-41"
    assert exactly_once._write_pattern("strom-spark", write).fullmatch(tid)
    assert not exactly_once._write_pattern("strom-spark", exactly_once.new_write_id()).fullmatch(
        tid
    )


def test_task_context_outside_spark_is_unique() -> None:
    first, second = exactly_once.task_context(), exactly_once.task_context()
    assert first[0] == 0 and first[2:] == (None, None)
    assert first[1] != second[1]

"""Logging: JSON lines with service, level, logger and bound context; stdlib routed through."""

from __future__ import annotations

import io
import json
import logging
import sys
from collections.abc import Callable, Iterator

import pytest
import structlog
from opentelemetry.sdk.trace import TracerProvider

from strom_server.runtime.logs import configure_logging, get_logger


def records(lines: list[str]) -> list[dict[str, object]]:
    return [json.loads(line) for line in lines]


def test_json_lines_carry_the_standard_fields(log_lines: Callable[[], list[str]]) -> None:
    get_logger("strom.test").info("segment rolled", base_offset=42, topic="orders")
    (record,) = records(log_lines())
    assert record["event"] == "segment rolled"
    assert record["level"] == "info"
    assert record["logger"] == "strom.test"
    assert record["service"] == "test-service"
    assert record["base_offset"] == 42 and record["topic"] == "orders"
    assert str(record["timestamp"]).endswith("Z") and "T" in str(record["timestamp"])


def test_bound_request_context_appears_and_goes(log_lines: Callable[[], list[str]]) -> None:
    log = get_logger("strom.test")
    with structlog.contextvars.bound_contextvars(rpc="/x.Y/Z", peer="ipv4:127.0.0.1:1"):
        log.info("inside")
    log.info("outside")
    inside, outside = records(log_lines())
    assert inside["rpc"] == "/x.Y/Z" and inside["peer"] == "ipv4:127.0.0.1:1"
    assert "rpc" not in outside


def test_stdlib_loggers_are_rendered_as_json_too(log_lines: Callable[[], list[str]]) -> None:
    logging.getLogger("grpc._cython.cygrpc").warning("channel %s closed", "c1")
    (record,) = records(log_lines())
    assert record["event"] == "channel c1 closed"
    assert record["logger"] == "grpc._cython.cygrpc"
    assert record["level"] == "warning"
    assert record["service"] == "test-service"


def test_exceptions_become_one_json_field(log_lines: Callable[[], list[str]]) -> None:
    try:
        raise KeyError("lost")
    except KeyError:
        get_logger("strom.test").exception("handler failed")
    lines = log_lines()
    assert len(lines) == 1
    (record,) = records(lines)
    assert "Traceback" in str(record["exception"]) and "KeyError" in str(record["exception"])


def test_trace_ids_are_added_inside_a_span(log_lines: Callable[[], list[str]]) -> None:
    tracer = TracerProvider().get_tracer("test")
    with tracer.start_as_current_span("work") as span:
        get_logger("strom.test").info("traced")
    (record,) = records(log_lines())
    assert record["trace_id"] == format(span.get_span_context().trace_id, "032x")
    assert record["span_id"] == format(span.get_span_context().span_id, "016x")


@pytest.fixture
def reset_logging() -> Iterator[None]:
    yield
    configure_logging("warning", "json", stream=sys.stderr)


@pytest.mark.usefixtures("reset_logging")
def test_level_filters_structlog_and_stdlib() -> None:
    buffer = io.StringIO()
    configure_logging("warning", "json", stream=buffer)
    get_logger("strom.test").info("dropped")
    logging.getLogger("etcd3").info("dropped too")
    get_logger("strom.test").warning("kept")
    assert [json.loads(line)["event"] for line in buffer.getvalue().splitlines()] == ["kept"]


@pytest.mark.usefixtures("reset_logging")
def test_console_format_is_for_people() -> None:
    buffer = io.StringIO()
    configure_logging("info", "console", service="strom-cli", stream=buffer)
    get_logger("strom.cli").info("cluster up", bootstrap="localhost:9092")
    text = buffer.getvalue()
    assert "cluster up" in text and "bootstrap=localhost:9092" in text
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)


@pytest.mark.usefixtures("reset_logging")
def test_reconfiguring_replaces_the_handler_and_rejects_bad_input() -> None:
    first, second = io.StringIO(), io.StringIO()
    configure_logging("info", "json", stream=first)
    configure_logging("info", "json", stream=second)
    get_logger("strom.test").info("once")
    assert first.getvalue() == "" and second.getvalue().count("once") == 1
    with pytest.raises(ValueError, match="log format"):
        configure_logging("info", "xml")
    with pytest.raises(ValueError, match="log level"):
        configure_logging("loud", "json")

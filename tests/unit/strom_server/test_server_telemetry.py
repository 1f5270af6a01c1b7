"""Telemetry: the Prometheus endpoint, RPC metrics, trace propagation, OTLP export."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
import grpc.aio
import pytest
from opentelemetry.proto.collector.metrics.v1 import (
    metrics_service_pb2,
    metrics_service_pb2_grpc,
)
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from server_testkit import RunningServer, list_offsets_request

from strom.protocol.v1 import storage_pb2_grpc
from strom_server.rpc.channels import open_channel
from strom_server.runtime.telemetry import Telemetry, create_telemetry, parse_metrics_listen

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def spans() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def telemetry(spans: InMemorySpanExporter) -> Iterator[Telemetry]:
    """Private providers (not the global ones), Prometheus on a free loopback port."""
    created = create_telemetry(
        "test-service",
        metrics_listen="127.0.0.1:0",
        span_processors=[SimpleSpanProcessor(spans)],
    )
    yield created
    created.shutdown()


def scrape(telemetry: Telemetry) -> str:
    assert telemetry.metrics_address is not None
    host, port = telemetry.metrics_address
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=5) as response:
        return str(response.read().decode())


def sample(text: str, name: str, **labels: str) -> float | None:
    """The value of the first sample ``name{...}`` whose labels include ``labels``."""
    for line in text.splitlines():
        match = re.fullmatch(r"([a-zA-Z_:][\w:]*)\{(.*)\} (\S+)", line)
        if not match or match.group(1) != name:
            continue
        found = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', match.group(2)))
        if all(found.get(key) == value for key, value in labels.items()):
            return float(match.group(3))
    return None


def test_rpc_latency_histogram_is_on_the_prometheus_endpoint(
    running_server: RunningServer, telemetry: Telemetry
) -> None:
    async def scenario() -> None:
        async with running_server(telemetry=telemetry) as (_server, channel):
            stub = storage_pb2_grpc.StorageNodeStub(channel)
            for _ in range(3):
                await stub.ListOffsets(list_offsets_request("orders"), timeout=5)
            with pytest.raises(grpc.aio.AioRpcError):
                await stub.ListOffsets(list_offsets_request("raise:retriable"), timeout=5)

    asyncio.run(scenario())
    text = scrape(telemetry)
    ok = {"rpc_method": "ListOffsets", "rpc_grpc_status_code": "0"}
    unavailable = {"rpc_method": "ListOffsets", "rpc_grpc_status_code": "14"}
    assert sample(text, "rpc_server_duration_milliseconds_count", **ok) == 3
    assert sample(text, "rpc_server_duration_milliseconds_count", **unavailable) == 1
    assert sample(text, "rpc_server_duration_milliseconds_bucket", le="+Inf", **ok) == 3
    assert sample(text, "rpc_server_duration_milliseconds_bucket", le="0.25", **ok) is not None
    assert (sample(text, "rpc_server_duration_milliseconds_sum", **ok) or 0) > 0
    assert 'rpc_service="strom.protocol.v1.StorageNode"' in text
    assert 'service_name="test-service"' in text  # target_info carries the resource


def test_shutdown_stops_the_endpoint() -> None:
    created = create_telemetry("test-service", metrics_listen="127.0.0.1:0")
    created.meter("test").create_counter("test.events").add(2)
    assert sample(scrape(created), "test_events_total") == 2
    created.shutdown()
    created.shutdown()  # idempotent
    with pytest.raises(urllib.error.URLError):
        scrape(created)


def test_metrics_port_in_use_is_an_os_error() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        with pytest.raises(OSError, match=f"cannot serve Prometheus metrics on 127.0.0.1:{port}"):
            create_telemetry("test-service", metrics_listen=f"127.0.0.1:{port}")


def by_kind(finished: tuple[ReadableSpan, ...], kind: SpanKind) -> ReadableSpan:
    (span,) = [s for s in finished if s.kind == kind]
    return span


def test_trace_context_flows_from_client_call_to_server_span(
    running_server: RunningServer, telemetry: Telemetry, spans: InMemorySpanExporter
) -> None:
    tracer = telemetry.tracer("test")

    def channel(target: str) -> grpc.aio.Channel:
        return open_channel(target, tracer_provider=telemetry.tracer_provider)

    async def scenario() -> None:
        async with running_server(telemetry=telemetry, channel_factory=channel) as (_s, ch):
            stub = storage_pb2_grpc.StorageNodeStub(ch)
            with tracer.start_as_current_span("produce batch"):
                await stub.ListOffsets(list_offsets_request("orders"), timeout=5)
            await asyncio.sleep(0.05)  # the client span ends from the call's done callback

    asyncio.run(scenario())
    finished = spans.get_finished_spans()
    caller = next(s for s in finished if s.name == "produce batch")
    client = by_kind(finished, SpanKind.CLIENT)
    server = by_kind(finished, SpanKind.SERVER)
    assert server.name == client.name == "strom.protocol.v1.StorageNode/ListOffsets"
    trace_id = caller.context.trace_id
    assert client.context.trace_id == server.context.trace_id == trace_id
    assert client.parent is not None and client.parent.span_id == caller.context.span_id
    assert server.parent is not None and server.parent.span_id == client.context.span_id
    assert server.parent.is_remote
    assert server.attributes is not None and server.attributes["rpc.grpc.status_code"] == 0
    assert server.attributes["rpc.method"] == "ListOffsets"


def test_incoming_traceparent_is_the_server_spans_parent(
    running_server: RunningServer,
    telemetry: Telemetry,
    spans: InMemorySpanExporter,
    log_lines: Callable[[], list[str]],
) -> None:
    trace_id, parent_id = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
    metadata = (("traceparent", f"00-{trace_id}-{parent_id}-01"),)

    async def scenario() -> None:
        async with running_server(telemetry=telemetry) as (_server, channel):
            stub = storage_pb2_grpc.StorageNodeStub(channel)
            await stub.ListOffsets(list_offsets_request("log:hello"), metadata=metadata, timeout=5)

    asyncio.run(scenario())
    server = by_kind(spans.get_finished_spans(), SpanKind.SERVER)
    assert format(server.context.trace_id, "032x") == trace_id
    assert server.parent is not None and format(server.parent.span_id, "016x") == parent_id
    # The handler's own log line carries the request context and the trace.
    (hello,) = [json.loads(line) for line in log_lines() if '"event": "hello"' in line]
    assert hello["trace_id"] == trace_id
    assert hello["span_id"] == format(server.context.span_id, "016x")
    assert hello["rpc"] == "/strom.protocol.v1.StorageNode/ListOffsets"
    assert hello["peer"].startswith("ipv4:127.0.0.1:")


def test_failed_rpc_span_is_an_error_with_the_exception(
    running_server: RunningServer, telemetry: Telemetry, spans: InMemorySpanExporter
) -> None:
    async def scenario() -> None:
        async with running_server(telemetry=telemetry) as (_server, channel):
            stub = storage_pb2_grpc.StorageNodeStub(channel)
            with pytest.raises(grpc.aio.AioRpcError):
                await stub.ListOffsets(list_offsets_request("raise:state"), timeout=5)

    asyncio.run(scenario())
    server = by_kind(spans.get_finished_spans(), SpanKind.SERVER)
    assert server.status.status_code == StatusCode.ERROR
    assert server.attributes is not None and server.attributes["rpc.grpc.status_code"] == 9
    assert [event.name for event in server.events] == ["exception"]


class _Collector(
    trace_service_pb2_grpc.TraceServiceServicer, metrics_service_pb2_grpc.MetricsServiceServicer
):
    """A minimal OTLP/gRPC receiver that keeps what it is sent."""

    def __init__(self) -> None:
        self.traces: list[trace_service_pb2.ExportTraceServiceRequest] = []
        self.metrics: list[metrics_service_pb2.ExportMetricsServiceRequest] = []

    def Export(self, request: Any, context: grpc.ServicerContext) -> Any:
        if isinstance(request, trace_service_pb2.ExportTraceServiceRequest):
            self.traces.append(request)
            return trace_service_pb2.ExportTraceServiceResponse()
        self.metrics.append(request)
        return metrics_service_pb2.ExportMetricsServiceResponse()


def test_otlp_exports_spans_and_metrics_when_configured() -> None:
    collector = _Collector()
    server = grpc.server(ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(collector, server)
    metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(collector, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        created = create_telemetry("otlp-test", otlp_endpoint=f"127.0.0.1:{port}")
        with created.tracer("test").start_as_current_span("exported span"):
            created.meter("test").create_counter("test.events").add(3)
        created.shutdown()  # flushes both exporters
    finally:
        server.stop(0)
    names = [
        span.name
        for request in collector.traces
        for resource_spans in request.resource_spans
        for scope_spans in resource_spans.scope_spans
        for span in scope_spans.spans
    ]
    assert names == ["exported span"]
    resource = collector.traces[0].resource_spans[0].resource
    attributes = {a.key: a.value.string_value for a in resource.attributes}
    assert attributes["service.name"] == "otlp-test"
    metric_names = {
        metric.name
        for request in collector.metrics
        for resource_metrics in request.resource_metrics
        for scope_metrics in resource_metrics.scope_metrics
        for metric in scope_metrics.metrics
    }
    assert "test.events" in metric_names


def test_setup_telemetry_installs_global_providers_once() -> None:
    script = """
from opentelemetry import metrics, trace
from strom_server.runtime.telemetry import installed_telemetry, setup_telemetry, shutdown_telemetry
first = setup_telemetry("svc", "127.0.0.1:0")
again = setup_telemetry("svc", "127.0.0.1:0")
assert again is first and installed_telemetry() is first
assert trace.get_tracer_provider() is first.tracer_provider
assert metrics.get_meter_provider() is first.meter_provider
assert first.metrics_address is not None and first.metrics_address[1] > 0
shutdown_telemetry()
print("ok")
"""
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "ok"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        ("", None),
        ("0", None),
        (0, None),
        (9464, ("127.0.0.1", 9464)),
        ("9464", ("127.0.0.1", 9464)),
        ("0.0.0.0:9464", ("0.0.0.0", 9464)),
        ("127.0.0.1:0", ("127.0.0.1", 0)),
    ],
)
def test_metrics_listen_forms(value: str | int | None, expected: tuple[str, int] | None) -> None:
    assert parse_metrics_listen(value) == expected


def test_traced_channel_carries_pipelined_streams(
    running_server: RunningServer, telemetry: Telemetry, spans: InMemorySpanExporter
) -> None:
    from strom.protocol.v1 import storage_pb2

    def channel(target: str) -> grpc.aio.Channel:
        return open_channel(target, tracer_provider=telemetry.tracer_provider)

    async def scenario() -> list[int]:
        async with running_server(telemetry=telemetry, channel_factory=channel) as (_s, ch):
            call = storage_pb2_grpc.StorageNodeStub(ch).ProduceStream(timeout=5)
            for correlation_id in range(1, 4):
                await call.write(storage_pb2.ProduceRequest(correlation_id=correlation_id))
            await call.done_writing()
            answers = [(await call.read()).correlation_id for _ in range(3)]
            assert await call.code() == grpc.StatusCode.OK
            await asyncio.sleep(0.05)
            return answers

    assert asyncio.run(scenario()) == [1, 2, 3]
    finished = spans.get_finished_spans()
    client = by_kind(finished, SpanKind.CLIENT)
    server = by_kind(finished, SpanKind.SERVER)
    assert server.name == "strom.protocol.v1.StorageNode/ProduceStream"
    assert server.parent is not None and server.parent.span_id == client.context.span_id


def test_without_an_exporter_only_traces_sampled_upstream_are_recorded() -> None:
    from opentelemetry import propagate
    from opentelemetry.sdk.trace import Span

    quiet = create_telemetry("no-exporter")
    try:
        root = quiet.tracer("test").start_span("root")
        assert not root.is_recording() and root.get_span_context().is_valid  # ids for the logs
        sampled = propagate.extract(
            {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
        )
        child = quiet.tracer("test").start_span("child", context=sampled)
        assert isinstance(child, Span) and child.is_recording()
        child.end()
    finally:
        quiet.shutdown()
    exporting = create_telemetry(
        "exporter", span_processors=[SimpleSpanProcessor(InMemorySpanExporter())]
    )
    try:
        assert exporting.tracer("test").start_span("root").is_recording()
    finally:
        exporting.shutdown()


def test_untraced_channel_with_trace_metadata_continues_the_callers_trace(
    running_server: RunningServer, telemetry: Telemetry, spans: InMemorySpanExporter
) -> None:
    from strom_server.rpc.channels import trace_metadata

    tracer = telemetry.tracer("test")

    def channel(target: str) -> grpc.aio.Channel:
        return open_channel(target, tracer_provider=telemetry.tracer_provider, traced=False)

    async def scenario() -> None:
        async with running_server(telemetry=telemetry, channel_factory=channel) as (_s, ch):
            stub = storage_pb2_grpc.StorageNodeStub(ch)
            with tracer.start_as_current_span("gateway request"):
                await stub.ListOffsets(
                    list_offsets_request("orders"), timeout=5, metadata=trace_metadata()
                )

    asyncio.run(scenario())
    finished = spans.get_finished_spans()
    caller = next(s for s in finished if s.name == "gateway request")
    assert not [s for s in finished if s.kind == SpanKind.CLIENT]
    server = by_kind(finished, SpanKind.SERVER)
    assert server.context.trace_id == caller.context.trace_id
    assert server.parent is not None and server.parent.span_id == caller.context.span_id


def test_rpc_observer_also_works_as_a_grpc_aio_interceptor(
    telemetry: Telemetry, spans: InMemorySpanExporter
) -> None:
    from strom_server.rpc.interceptors import RpcObserver

    async def echo(request: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
        return request

    async def scenario() -> bytes:
        server = grpc.aio.server(
            interceptors=[RpcObserver(telemetry.tracer_provider, telemetry.meter_provider)]
        )
        handler = grpc.unary_unary_rpc_method_handler(echo)
        server.add_generic_rpc_handlers(
            [grpc.method_handlers_generic_handler("t.E", {"Up": handler})]
        )
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                return await channel.unary_unary("/t.E/Up")(b"hi", timeout=5)  # type: ignore[no-any-return]
        finally:
            await server.stop(None)

    assert asyncio.run(scenario()) == b"hi"
    server_span = by_kind(spans.get_finished_spans(), SpanKind.SERVER)
    assert server_span.name == "t.E/Up"
    assert (
        server_span.attributes is not None and server_span.attributes["rpc.grpc.status_code"] == 0
    )

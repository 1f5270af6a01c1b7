"""OpenTelemetry set-up: metrics with a Prometheus scrape endpoint, traces, optional OTLP export.

``setup_telemetry`` builds and installs, once per process, the global providers:

- a ``MeterProvider`` read by a ``PrometheusMetricReader`` whose registry is served over HTTP
  (``prometheus_client.start_http_server``) at ``metrics_listen``: ``0``/empty = off, a bare
  port = ``127.0.0.1:<port>``, or ``host:port`` (port 0 = a free port, see
  ``Telemetry.metrics_address``); plus a periodic OTLP metric exporter when an OTLP endpoint
  is configured;
- a ``TracerProvider`` that exports spans in batches to OTLP when an endpoint is configured.
  With nowhere to send spans (no endpoint, no span processor, no ``OTEL_TRACES_SAMPLER``) it
  samples nothing of its own (``ParentBased(ALWAYS_OFF)``): spans still carry ids, so trace
  context and the log lines' ``trace_id`` propagate, but a request pays for a recorded span
  only when a caller sampled its trace (recording cost ~60 us per RPC on the data path).

``create_telemetry`` builds the same without installing it globally: tests use it to get
private providers (with an in-memory span exporter) and pass them to ``GrpcServer``.
``Telemetry.shutdown`` flushes pending spans and metrics and stops the HTTP endpoint.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from wsgiref.simple_server import WSGIServer

from opentelemetry import metrics, trace
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View
from opentelemetry.sdk.resources import SERVICE_INSTANCE_ID, SERVICE_NAME, Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ParentBased
from prometheus_client import CollectorRegistry, start_http_server

from strom_server.runtime.logs import get_logger
from strom_server.runtime.values import split_host_port

__all__ = [
    "LATENCY_BUCKETS_MS",
    "Telemetry",
    "create_telemetry",
    "installed_telemetry",
    "parse_metrics_listen",
    "setup_telemetry",
    "shutdown_telemetry",
]

log = get_logger(__name__)

LATENCY_BUCKETS_MS: tuple[float, ...] = (
    0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000,
)  # fmt: skip
"""Histogram buckets of every ``*.duration`` instrument in milliseconds (RPCs are sub-ms)."""

_OTLP_TIMEOUT_S = 5.0


def parse_metrics_listen(value: str | int | None) -> tuple[str, int] | None:
    """``0``/``""``/None -> None (off); ``"9464"`` -> ``("127.0.0.1", 9464)``; ``host:port``."""
    if value is None:
        return None
    text = str(value).strip()
    if text in ("", "0"):
        return None
    if text.isdigit():
        return "127.0.0.1", int(text)
    return split_host_port(text)


def _otlp_target(endpoint: str) -> tuple[str, bool]:
    """(endpoint URL, insecure) for the OTLP gRPC exporters."""
    if endpoint.startswith("https://"):
        return endpoint, False
    if endpoint.startswith("http://"):
        return endpoint, True
    return f"http://{endpoint}", True


@dataclass
class Telemetry:
    """The providers of one process (or one test) and the Prometheus endpoint serving them."""

    service_name: str
    tracer_provider: TracerProvider
    meter_provider: MeterProvider
    registry: CollectorRegistry
    metrics_address: tuple[str, int] | None = None
    """Where the Prometheus endpoint listens (the real port when 0 was asked), None if off."""
    _http: tuple[WSGIServer, threading.Thread] | None = field(default=None, repr=False)
    _closed: bool = field(default=False, repr=False)

    def tracer(self, name: str) -> trace.Tracer:
        return self.tracer_provider.get_tracer(name)

    def meter(self, name: str) -> metrics.Meter:
        return self.meter_provider.get_meter(name)

    def shutdown(self, timeout_s: float = 5.0) -> None:
        """Flush spans and metrics, stop exporters and the HTTP endpoint; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        try:
            self.tracer_provider.shutdown()
            self.meter_provider.shutdown(timeout_millis=timeout_s * 1000)
        finally:
            if self._http is not None:
                server, thread = self._http
                server.shutdown()
                server.server_close()
                thread.join(timeout_s)


def create_telemetry(
    service_name: str,
    *,
    metrics_listen: str | int | None = None,
    otlp_endpoint: str = "",
    span_processors: Sequence[SpanProcessor] = (),
    metric_readers: Sequence[MetricReader] = (),
) -> Telemetry:
    """Build (but do not install globally) providers for ``service_name``.

    ``span_processors`` and ``metric_readers`` are added to the ones configured here (tests
    pass an in-memory span exporter this way).
    """
    resource = Resource.create(
        {SERVICE_NAME: service_name, SERVICE_INSTANCE_ID: f"{socket.gethostname()}-{os.getpid()}"}
    )
    registry = CollectorRegistry(auto_describe=True)
    readers: list[MetricReader] = [PrometheusMetricReader(registry=registry), *metric_readers]
    exporting = bool(otlp_endpoint or span_processors or os.environ.get("OTEL_TRACES_SAMPLER"))
    tracer_provider = TracerProvider(
        resource=resource, sampler=None if exporting else ParentBased(ALWAYS_OFF)
    )
    if otlp_endpoint:
        # Imported here: the OTLP exporters are heavy and most test processes never need them.
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        url, insecure = _otlp_target(otlp_endpoint)
        readers.append(
            PeriodicExportingMetricReader(
                OTLPMetricExporter(endpoint=url, insecure=insecure, timeout=_OTLP_TIMEOUT_S)
            )
        )
        tracer_provider.add_span_processor(
            BatchSpanProcessor(
                OTLPSpanExporter(endpoint=url, insecure=insecure, timeout=_OTLP_TIMEOUT_S)
            )
        )
    for processor in span_processors:
        tracer_provider.add_span_processor(processor)
    meter_provider = MeterProvider(
        resource=resource,
        metric_readers=readers,
        views=[
            View(
                instrument_name="*.duration",
                aggregation=ExplicitBucketHistogramAggregation(LATENCY_BUCKETS_MS),
            )
        ],
    )
    telemetry = Telemetry(service_name, tracer_provider, meter_provider, registry)
    bind = parse_metrics_listen(metrics_listen)
    if bind is not None:
        host, port = bind
        try:
            server, thread = start_http_server(port, addr=host or "0.0.0.0", registry=registry)
        except OSError as exc:
            telemetry.shutdown()
            raise OSError(f"cannot serve Prometheus metrics on {host}:{port}: {exc}") from exc
        telemetry._http = (server, thread)
        telemetry.metrics_address = (host, server.server_port)
    return telemetry


_installed: Telemetry | None = None
_install_lock = threading.Lock()


def setup_telemetry(
    service_name: str,
    metrics_listen: str | int | None = None,
    otlp_endpoint: str = "",
) -> Telemetry:
    """Create the process's telemetry and install it as the OpenTelemetry global providers.

    OpenTelemetry allows one global provider per process, so a second call returns the
    first call's ``Telemetry`` (and logs a warning when its arguments differ).
    """
    global _installed
    with _install_lock:
        if _installed is not None:
            if _installed.service_name != service_name:
                log.warning(
                    "telemetry already set up",
                    service=_installed.service_name,
                    requested_service=service_name,
                )
            return _installed
        telemetry = create_telemetry(
            service_name, metrics_listen=metrics_listen, otlp_endpoint=otlp_endpoint
        )
        trace.set_tracer_provider(telemetry.tracer_provider)
        metrics.set_meter_provider(telemetry.meter_provider)
        _installed = telemetry
    if telemetry.metrics_address is not None:
        host, port = telemetry.metrics_address
        log.info("metrics endpoint listening", address=f"{host}:{port}", path="/metrics")
    return telemetry


def installed_telemetry() -> Telemetry | None:
    """The ``Telemetry`` installed by ``setup_telemetry``, if any."""
    return _installed


def shutdown_telemetry(timeout_s: float = 5.0) -> None:
    """Flush and stop the installed telemetry (no-op when none was set up)."""
    if _installed is not None:
        _installed.shutdown(timeout_s)

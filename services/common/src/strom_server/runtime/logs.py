"""Structured logging for servers and the CLI: structlog in front, stdlib logging underneath.

``configure_logging`` sends every log line, from structlog loggers and from stdlib loggers
(grpc, etcd3, ...) alike, through one handler on the root logger that renders either

- ``json``: one JSON object per line on stderr, with ``timestamp`` (ISO 8601, UTC), ``level``,
  ``logger``, ``event``, ``service``, the request context bound with
  ``structlog.contextvars.bind_contextvars`` (the server interceptors bind ``rpc`` and
  ``peer``), ``trace_id``/``span_id`` when a span is current, any keyword arguments, and
  ``exception`` (the formatted traceback) for ``log.exception(...)``; or
- ``console``: a readable, aligned line for people (the ``strom`` CLI).

Modules log through ``log = get_logger(__name__)`` and ``log.info("event", key=value)``.
Calling ``configure_logging`` again replaces the previous set-up (tests do this).
"""

from __future__ import annotations

import logging
import sys
from typing import Any, TextIO

import structlog
from opentelemetry import trace
from structlog.typing import EventDict, Processor, WrappedLogger

__all__ = ["LOG_FORMATS", "LOG_LEVELS", "configure_logging", "get_logger"]

LOG_FORMATS = ("json", "console")
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")

_service: str | None = None
_handler: logging.Handler | None = None


def _add_service(_logger: WrappedLogger, _method: str, event: EventDict) -> EventDict:
    if _service is not None:
        event.setdefault("service", _service)
    return event


def _add_trace_context(_logger: WrappedLogger, _method: str, event: EventDict) -> EventDict:
    context = trace.get_current_span().get_span_context()
    if context.is_valid:
        event.setdefault("trace_id", format(context.trace_id, "032x"))
        event.setdefault("span_id", format(context.span_id, "016x"))
    return event


_FIRST_KEYS = ("timestamp", "level", "service", "logger", "event")
_QUIET_LIBRARIES = ("asyncio", "grpc")
"""Libraries whose debug output is internals: kept at info or above whatever the level."""


def _standard_keys_first(_logger: WrappedLogger, _method: str, event: EventDict) -> EventDict:
    ordered = {key: event.pop(key) for key in _FIRST_KEYS if key in event}
    ordered.update(event)
    return ordered


def _shared_processors() -> list[Processor]:
    return [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        _add_service,
        _add_trace_context,
    ]


def _renderer(fmt: str, stream: TextIO) -> list[Processor]:
    if fmt == "json":
        return [
            structlog.processors.format_exc_info,
            _standard_keys_first,
            structlog.processors.JSONRenderer(sort_keys=False),
        ]
    colors = bool(getattr(stream, "isatty", lambda: False)())
    return [structlog.dev.ConsoleRenderer(colors=colors)]


def configure_logging(
    level: str | int = "info",
    fmt: str = "json",
    *,
    service: str | None = None,
    stream: TextIO | None = None,
) -> None:
    """Route structlog and stdlib logging to ``stream`` (default stderr) as ``fmt`` lines.

    ``level`` is a name from ``LOG_LEVELS`` (or a ``logging`` number); ``service`` is added to
    every line as ``service``.
    """
    global _service, _handler
    if fmt not in LOG_FORMATS:
        raise ValueError(f"log format must be one of {', '.join(LOG_FORMATS)}, not {fmt!r}")
    numeric = level if isinstance(level, int) else logging.getLevelNamesMapping().get(level.upper())
    if numeric is None:
        raise ValueError(f"log level must be one of {', '.join(LOG_LEVELS)}, not {level!r}")
    out = stream if stream is not None else sys.stderr
    _service = service

    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[*_shared_processors(), structlog.stdlib.ExtraAdder()],
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            *_renderer(fmt, out),
        ],
    )
    handler = logging.StreamHandler(out)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    if _handler is not None:
        root.removeHandler(_handler)
    root.addHandler(handler)
    root.setLevel(numeric)
    for name in _QUIET_LIBRARIES:
        logging.getLogger(name).setLevel(max(numeric, logging.INFO))
    _handler = handler

    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            *_shared_processors(),
            structlog.stdlib.PositionalArgumentsFormatter(),
            structlog.processors.StackInfoRenderer(),
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        # Safe to cache: everything that changes on reconfiguration (level, service, output)
        # is read at call time from the stdlib logger tree and this module.
        cache_logger_on_first_use=True,
    )


def get_logger(name: str | None = None, **initial: Any) -> structlog.stdlib.BoundLogger:
    """A structlog logger named ``name`` (use ``__name__``), with ``initial`` values bound."""
    logger: structlog.stdlib.BoundLogger = structlog.stdlib.get_logger(name, **initial)
    return logger

"""Generated service handlers with chosen methods' bytes passing through unparsed.

A service registers its generated handlers through ``add_with_raw_methods``: a method named
in ``raw_requests`` hands its handler the request's serialized bytes (the handler reads what
it needs, see ``strom_server.rpc.protowire``); one named in ``raw_responses`` may return bytes,
sent as they are, or a message, serialized as usual.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

import grpc

__all__ = ["add_with_raw_methods", "serialize"]


def serialize(message: Any) -> bytes:
    """Bytes pass through; messages serialize as usual."""
    return message if isinstance(message, bytes) else message.SerializeToString()  # type: ignore[no-any-return]


class _RawMethods:
    """Stands in for the server while the generated ``add_*_to_server`` registers handlers."""

    def __init__(self, server: Any, raw_requests: Collection[str], raw_responses: Collection[str]):
        self._server = server
        self._raw_requests = raw_requests
        self._raw_responses = raw_responses

    def add_generic_rpc_handlers(self, handlers: Any) -> None:
        """Replaced by the registered handlers below (same methods)."""

    def add_registered_method_handlers(self, service: str, handlers: dict[str, Any]) -> None:
        patched = {}
        for name, generated in handlers.items():
            handler = generated
            if name in self._raw_requests:
                handler = handler._replace(request_deserializer=None)
            if name in self._raw_responses:
                handler = handler._replace(response_serializer=serialize)
            patched[name] = handler
        self._server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(service, patched),)
        )
        self._server.add_registered_method_handlers(service, patched)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._server, name)


def add_with_raw_methods(
    add_generated: Callable[[Any, Any], None],
    servicer: Any,
    server: Any,
    *,
    raw_requests: Collection[str] = (),
    raw_responses: Collection[str] = (),
) -> None:
    """``add_generated(servicer, server)`` (a generated ``add_*Servicer_to_server``) with the
    named methods' requests and responses left as bytes."""
    add_generated(servicer, _RawMethods(server, raw_requests, raw_responses))

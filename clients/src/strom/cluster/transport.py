"""gRPC channels for clients, and the one place where gRPC errors become ``strom.errors``.

Every RPC a client makes runs inside ``translate_errors(target)``, the boundary between gRPC
and the client library: a ``grpc.RpcError`` leaves it as the matching ``strom.errors``
exception (``from_rpc_error``), the original as its ``__cause__``. A server that fails a whole
request puts the ``ErrorCode`` in the trailing metadata key ``strom-error-code``; the exact
class is rebuilt from it. A TLS mismatch (a plaintext client on a TLS port, the reverse, an
untrusted certificate: ``strom.cluster.tls_mismatch``) becomes the non-retriable
``SslHandshakeFailedError``. Otherwise the gRPC status decides. Callers of the client library
never see ``grpc.RpcError``.

Public (``strom.cluster``): services use the same channel options and translation when they
call each other as clients.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import grpc

from strom.cluster.tls_mismatch import diagnose
from strom.errors import (
    ERROR_CODE_METADATA_KEY,
    ClusterAuthorizationFailedError,
    InvalidRequestError,
    MessageTooLargeError,
    NetworkExceptionError,
    RequestTimedOutError,
    SaslAuthenticationFailedError,
    StromError,
    UnknownServerError,
    UnsupportedVersionError,
    for_code,
)

__all__ = ["DEFAULT_MAX_MESSAGE_SIZE", "channel_options", "from_rpc_error", "translate_errors"]

DEFAULT_MAX_MESSAGE_SIZE = 64 * 1024 * 1024

_BY_STATUS: dict[grpc.StatusCode, type[StromError]] = {
    grpc.StatusCode.UNAVAILABLE: NetworkExceptionError,
    # A server going away cancels the calls it was serving: a network failure, retriable.
    grpc.StatusCode.CANCELLED: NetworkExceptionError,
    grpc.StatusCode.DEADLINE_EXCEEDED: RequestTimedOutError,
    grpc.StatusCode.RESOURCE_EXHAUSTED: MessageTooLargeError,
    grpc.StatusCode.UNIMPLEMENTED: UnsupportedVersionError,
    grpc.StatusCode.INVALID_ARGUMENT: InvalidRequestError,
    # A TLS or authentication failure seen before any Strom server code ran.
    grpc.StatusCode.UNAUTHENTICATED: SaslAuthenticationFailedError,
    grpc.StatusCode.PERMISSION_DENIED: ClusterAuthorizationFailedError,
}


def channel_options(max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> list[tuple[str, int]]:
    """gRPC channel options: send and receive limits of ``max_message_size`` bytes."""
    return [
        ("grpc.max_receive_message_length", max_message_size),
        ("grpc.max_send_message_length", max_message_size),
    ]


def from_rpc_error(exc: grpc.RpcError, target: str = "") -> StromError:
    """The ``strom.errors`` exception for a failed call (the original is its ``__cause__``)."""
    code = exc.code() if hasattr(exc, "code") else None
    details = exc.details() if hasattr(exc, "details") else str(exc)
    where = f"{target}: " if target else ""
    trailers = exc.trailing_metadata() if hasattr(exc, "trailing_metadata") else None
    for key, value in trailers or ():
        if key == ERROR_CODE_METADATA_KEY:
            try:
                return for_code(int(value), f"{where}{details}")
            except ValueError:
                break
    if code == grpc.StatusCode.UNAVAILABLE and details:
        mismatch = diagnose(details, target)
        if mismatch is not None:
            return mismatch
    cls = _BY_STATUS.get(code, UnknownServerError)  # type: ignore[arg-type]
    name = code.name if code is not None else "error"
    return cls(f"{where}{name}: {details}")


@contextmanager
def translate_errors(target: str | Callable[[], str] = "") -> Iterator[None]:
    """Re-raise a gRPC error inside the block as its ``strom.errors`` exception (the
    ``grpc.RpcError`` as ``__cause__``). ``target`` names the peer in the message; a callable
    is called only when a call failed."""
    try:
        yield
    except grpc.RpcError as exc:
        raise from_rpc_error(exc, target() if callable(target) else target) from exc

"""gRPC failures become strom.errors at one boundary (strom.cluster.transport), over real gRPC."""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest

from strom import Admin, errors
from strom.cluster import translate_errors
from strom.errors import ERROR_CODE_METADATA_KEY, ErrorCode

CLIENT_SOURCES = Path(__file__).resolve().parents[4] / "clients" / "src" / "strom"


def _abort_with(code: grpc.StatusCode, trailer: str | None) -> grpc.GenericRpcHandler:
    def handler(request: bytes, context: grpc.ServicerContext) -> bytes:
        if trailer is not None:
            context.set_trailing_metadata(((ERROR_CODE_METADATA_KEY, trailer),))
        context.abort(code, "told to fail")

    return grpc.method_handlers_generic_handler(
        "test.Fail", {"Call": grpc.unary_unary_rpc_method_handler(handler)}
    )


@pytest.fixture
def failing_server() -> Iterator[Callable[..., grpc.UnaryUnaryMultiCallable]]:
    servers: list[grpc.Server] = []

    def start(code: grpc.StatusCode, trailer: str | None) -> grpc.UnaryUnaryMultiCallable:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        server.add_generic_rpc_handlers((_abort_with(code, trailer),))
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        servers.append(server)
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        return channel.unary_unary("/test.Fail/Call")

    yield start
    for server in servers:
        server.stop(None)


@pytest.mark.parametrize(
    ("status", "trailer", "expected"),
    [
        (grpc.StatusCode.UNAVAILABLE, str(ErrorCode.NOT_CONTROLLER), errors.NotControllerError),
        (
            grpc.StatusCode.INVALID_ARGUMENT,
            str(ErrorCode.INVALID_CONFIG),
            errors.InvalidConfigError,
        ),
        (grpc.StatusCode.UNAVAILABLE, None, errors.NetworkExceptionError),
        (grpc.StatusCode.DEADLINE_EXCEEDED, None, errors.RequestTimedOutError),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, None, errors.MessageTooLargeError),
        (grpc.StatusCode.INTERNAL, None, errors.UnknownServerError),
        (grpc.StatusCode.INTERNAL, "not-a-number", errors.UnknownServerError),
    ],
)
def test_grpc_errors_become_strom_errors(failing_server, status, trailer, expected) -> None:  # type: ignore[no-untyped-def]
    call = failing_server(status, trailer)
    with pytest.raises(expected) as raised, translate_errors("node-1"):
        call(b"", timeout=5)
    assert "told to fail" in str(raised.value) and "node-1" in str(raised.value)
    assert isinstance(raised.value.__cause__, grpc.RpcError)


def test_a_callable_target_is_asked_only_when_a_call_failed(failing_server) -> None:  # type: ignore[no-untyped-def]
    asked: list[str] = []

    def target() -> str:
        asked.append("node-2")
        return "node-2"

    with translate_errors(target):
        pass
    assert asked == []
    call = failing_server(grpc.StatusCode.UNAVAILABLE, None)
    with pytest.raises(errors.NetworkExceptionError, match="node-2"), translate_errors(target):
        call(b"", timeout=5)
    assert asked == ["node-2"]


def test_the_client_library_catches_grpc_errors_in_one_place() -> None:
    """Every client RPC runs inside ``translate_errors``: no other module of ``strom`` handles
    ``grpc.RpcError`` itself."""
    catching = []
    for path in sorted(CLIENT_SOURCES.rglob("*.py")):
        if "protocol" in path.parts or path == CLIENT_SOURCES / "cluster" / "transport.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            handled = ast.unparse(node.type) if isinstance(node, ast.ExceptHandler) else ""
            if "RpcError" in handled:
                catching.append(f"{path.relative_to(CLIENT_SOURCES)}:{node.lineno}")
    assert catching == []


def test_admin_rejects_bad_options_naming_them() -> None:
    with pytest.raises(errors.ConfigurationError, match="bootstrap_servers"):
        Admin(bootstrap_servers=" , ")
    with pytest.raises(errors.ConfigurationError, match="request_timeout_ms"):
        Admin(request_timeout_ms=0)
    with Admin("127.0.0.1:1") as admin, pytest.raises(errors.ConfigurationError, match="election"):
        admin.elect_leaders("sometimes")


def test_admin_reports_an_unreachable_gateway_as_a_retriable_strom_error(free_port) -> None:  # type: ignore[no-untyped-def]
    with (
        Admin(f"127.0.0.1:{free_port()}", request_timeout_ms=2000) as admin,
        pytest.raises(errors.StromError) as raised,
    ):
        admin.list_topics()
    assert raised.value.retriable

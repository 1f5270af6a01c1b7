"""GrpcServer on 127.0.0.1: health, reflection, size limits, error mapping, streams, hooks."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Callable

import grpc
import grpc.aio
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from server_testkit import RunningServer, list_offsets_request

from strom.errors import ErrorCode, for_code
from strom.protocol.v1 import storage_pb2, storage_pb2_grpc
from strom_server.rpc.errors import ERROR_CODE_KEY, status_for_exception
from strom_server.rpc.server import GrpcServer
from strom_server.runtime.config import ServerConfig
from strom_server.runtime.values import KiB

pytestmark = pytest.mark.timeout(30)

SERVICE = "strom.protocol.v1.StorageNode"
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


def error_code(error: grpc.aio.AioRpcError) -> int:
    trailers = dict(error.trailing_metadata() or ())
    return int(trailers[ERROR_CODE_KEY])


def test_serves_on_a_free_port_with_health_and_names(running_server: RunningServer) -> None:
    async def scenario() -> None:
        async with running_server() as (server, channel):
            assert server.port > 0
            assert server.address == f"127.0.0.1:{server.port}"
            assert server.service_names == (SERVICE,)
            health = health_pb2_grpc.HealthStub(channel)
            for name in ("", SERVICE):
                reply = await health.Check(health_pb2.HealthCheckRequest(service=name), timeout=5)
                assert reply.status == SERVING
            await server.set_serving(SERVICE, False)
            reply = await health.Check(health_pb2.HealthCheckRequest(service=SERVICE), timeout=5)
            assert reply.status == NOT_SERVING
            stub = storage_pb2_grpc.StorageNodeStub(channel)
            reply = await stub.ListOffsets(list_offsets_request("orders", 2), timeout=5)
            assert reply.partitions[0].offset == 206 and reply.partitions[0].leader_epoch == 7

    asyncio.run(scenario())


def test_reflection_lists_the_services(running_server: RunningServer) -> None:
    async def scenario() -> None:
        async with running_server() as (_server, channel):
            stub = reflection_pb2_grpc.ServerReflectionStub(channel)
            request = reflection_pb2.ServerReflectionRequest(list_services="")
            call = stub.ServerReflectionInfo(iter([request]), timeout=5)
            names = [s.name async for reply in call for s in reply.list_services_response.service]
            assert SERVICE in names and "grpc.health.v1.Health" in names

    asyncio.run(scenario())


def test_listening_is_logged_with_the_bound_port(
    running_server: RunningServer, log_lines: Callable[[], list[str]]
) -> None:
    async def scenario() -> int:
        async with running_server() as (server, _channel):
            return server.port

    port = asyncio.run(scenario())
    events = [json.loads(line) for line in log_lines()]
    listening = [e for e in events if e["event"] == "listening"]
    assert listening and listening[0]["port"] == port and listening[0]["services"] == [SERVICE]


def test_oversized_request_is_refused_and_the_server_keeps_serving(
    running_server: RunningServer,
) -> None:
    async def scenario() -> None:
        config = ServerConfig(max_message_size=64 * KiB, shutdown_grace=1.0)
        async with running_server(config) as (_server, channel):
            stub = storage_pb2_grpc.StorageNodeStub(channel)
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await stub.ListOffsets(list_offsets_request("t" * (100 * KiB)), timeout=5)
            assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            reply = await stub.ListOffsets(list_offsets_request("small"), timeout=5)
            assert reply.partitions[0].offset == 5

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("topic", "status", "code"),
    [
        ("raise:retriable", grpc.StatusCode.UNAVAILABLE, ErrorCode.NOT_LEADER_OR_FOLLOWER),
        ("raise:invalid", grpc.StatusCode.INVALID_ARGUMENT, ErrorCode.INVALID_REQUEST),
        ("raise:state", grpc.StatusCode.FAILED_PRECONDITION, ErrorCode.OFFSET_OUT_OF_RANGE),
        ("raise:config", grpc.StatusCode.INVALID_ARGUMENT, ErrorCode.INVALID_CONFIG),
        ("raise:bug", grpc.StatusCode.INTERNAL, ErrorCode.UNKNOWN_SERVER_ERROR),
    ],
)
def test_handler_errors_become_statuses_with_the_error_code_trailer(
    running_server: RunningServer, topic: str, status: grpc.StatusCode, code: int
) -> None:
    async def scenario() -> grpc.aio.AioRpcError:
        async with running_server() as (_server, channel):
            stub = storage_pb2_grpc.StorageNodeStub(channel)
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await stub.ListOffsets(list_offsets_request(topic), timeout=5)
            # The failure is per call: the next request is served normally.
            await stub.ListOffsets(list_offsets_request("ok"), timeout=5)
            return caught.value

    error = asyncio.run(scenario())
    assert error.code() == status
    assert error_code(error) == code
    assert for_code(error_code(error)).code == code  # the client can rebuild the exception


def test_unexpected_exception_is_internal_short_and_logged(
    running_server: RunningServer, log_lines: Callable[[], list[str]]
) -> None:
    async def scenario() -> grpc.aio.AioRpcError:
        async with running_server() as (_server, channel):
            stub = storage_pb2_grpc.StorageNodeStub(channel)
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await stub.ListOffsets(list_offsets_request("raise:bug"), timeout=5)
            return caught.value

    error = asyncio.run(scenario())
    assert error.code() == grpc.StatusCode.INTERNAL
    assert error.details() == "internal server error (ZeroDivisionError); see the server log"
    logged = [json.loads(line) for line in log_lines()]
    (failure,) = [e for e in logged if e["event"] == "unhandled error in rpc handler"]
    assert failure["level"] == "error" and "ZeroDivisionError" in failure["exception"]
    assert failure["rpc"] == f"/{SERVICE}/ListOffsets" and failure["peer"].startswith("ipv4:")


def test_a_handlers_own_abort_passes_through(running_server: RunningServer) -> None:
    async def scenario() -> grpc.aio.AioRpcError:
        async with running_server() as (_server, channel):
            stub = storage_pb2_grpc.StorageNodeStub(channel)
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await stub.ListOffsets(list_offsets_request("abort:not-found"), timeout=5)
            return caught.value

    error = asyncio.run(scenario())
    assert error.code() == grpc.StatusCode.NOT_FOUND and error.details() == "no such thing"
    assert ERROR_CODE_KEY not in dict(error.trailing_metadata() or ())


def test_a_request_that_does_not_parse_is_invalid_and_the_server_keeps_serving(
    running_server: RunningServer,
) -> None:
    async def scenario() -> None:
        async with running_server() as (_server, channel):
            list_offsets = channel.unary_unary(f"/{SERVICE}/ListOffsets")
            for garbage in (b"\xff\xff\xff", b"\x0a\xff\xff\xff\xff\x0f", b"\x0a\x05ab"):
                with pytest.raises(grpc.aio.AioRpcError) as caught:
                    await list_offsets(garbage, timeout=5)
                assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
                assert error_code(caught.value) == ErrorCode.INVALID_REQUEST
                assert "malformed ListOffsetsRequest: " in (caught.value.details() or "")
            stub = storage_pb2_grpc.StorageNodeStub(channel)
            reply = await stub.ListOffsets(list_offsets_request("ok"), timeout=5)
            assert reply.partitions[0].offset == 2

    asyncio.run(scenario())


def test_a_stream_message_that_does_not_parse_ends_the_stream_after_the_earlier_answers(
    running_server: RunningServer,
) -> None:
    async def scenario() -> None:
        async with running_server() as (_server, channel):
            call = channel.stream_stream(
                f"/{SERVICE}/ProduceStream",
                response_deserializer=storage_pb2.ProduceResponse.FromString,
            )(timeout=5)
            await call.write(produce(1).SerializeToString())
            first = await call.read()
            assert first.correlation_id == 1
            await call.write(b"\x0a\xff\xff\xff\xff\x0f")
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await call.read()
            assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert error_code(caught.value) == ErrorCode.INVALID_REQUEST
            assert "malformed ProduceRequest: " in (caught.value.details() or "")

    asyncio.run(scenario())


def produce(correlation_id: int, client_id: str = "test") -> storage_pb2.ProduceRequest:
    return storage_pb2.ProduceRequest(
        correlation_id=correlation_id,
        client_id=client_id,
        partitions=[storage_pb2.ProducePartitionData(topic="orders", partition=1)],
    )


def test_pipelined_stream_answers_in_order(running_server: RunningServer) -> None:
    async def scenario() -> None:
        async with running_server() as (_server, channel):
            stub = storage_pb2_grpc.StorageNodeStub(channel)
            call = stub.ProduceStream(timeout=5)
            for correlation_id in range(1, 6):  # five in flight before reading any answer
                await call.write(produce(correlation_id))
            await call.done_writing()
            answers = [(r.correlation_id, r.partitions[0].base_offset) async for r in call]
            assert answers == [(i, i * 10) for i in range(1, 6)]
            assert await call.code() == grpc.StatusCode.OK

    asyncio.run(scenario())


def test_stream_failing_midway_gets_the_mapped_status(running_server: RunningServer) -> None:
    async def scenario() -> None:
        async with running_server() as (_server, channel):
            stub = storage_pb2_grpc.StorageNodeStub(channel)
            call = stub.ProduceStream(timeout=5)
            await call.write(produce(1))
            first = await call.read()
            assert first.correlation_id == 1
            await call.write(produce(2, client_id="raise:retriable"))
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await call.read()
            assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
            assert error_code(caught.value) == ErrorCode.NOT_LEADER_OR_FOLLOWER

    asyncio.run(scenario())


def test_stop_turns_health_to_not_serving_and_runs_hooks_in_reverse(
    log_lines: Callable[[], list[str]],
) -> None:
    ran: list[str] = []

    async def first() -> None:
        ran.append("first")

    async def failing() -> None:
        ran.append("failing")
        raise RuntimeError("hook broke")

    async def last() -> None:
        ran.append("last")

    async def scenario() -> None:
        server = GrpcServer(ServerConfig(shutdown_grace=2.0), "test")
        for hook in (first, failing, last):
            server.on_shutdown(hook)
        await server.start()
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            watch = health_pb2_grpc.HealthStub(channel).Watch(
                health_pb2.HealthCheckRequest(service=""), timeout=10
            )
            assert (await watch.read()).status == SERVING
            stopping = asyncio.ensure_future(server.stop())
            assert (await watch.read()).status == NOT_SERVING
            watch.cancel()  # an open Watch is an in-flight RPC: end it to skip the grace wait
            await stopping
            await server.stop()  # idempotent

    asyncio.run(scenario())
    assert ran == ["last", "failing", "first"]
    events = [json.loads(line) for line in log_lines()]
    assert any(
        e["event"] == "shutdown hook failed" and "hook broke" in e["exception"] for e in events
    )


def test_busy_port_is_an_os_error() -> None:
    async def scenario(port: int) -> None:
        server = GrpcServer(ServerConfig(listen=f"127.0.0.1:{port}"), "test")
        try:
            with pytest.raises(OSError, match=f"cannot listen on 127.0.0.1:{port}"):
                await server.start()
        finally:
            await server.stop(0)

    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        asyncio.run(scenario(holder.getsockname()[1]))


def test_status_table_for_other_strom_errors() -> None:
    from strom.errors import StromError, StromTimeoutError, UnknownServerError

    assert (
        status_for_exception(StromTimeoutError("flush")).code == grpc.StatusCode.DEADLINE_EXCEEDED
    )
    assert status_for_exception(StromError("odd")).code == grpc.StatusCode.INTERNAL
    unknown = status_for_exception(UnknownServerError("?"))
    assert unknown.code == grpc.StatusCode.INTERNAL and not unknown.unexpected
    assert unknown.trailing_metadata == ((ERROR_CODE_KEY, "-1"),)


def test_serve_returns_after_request_stop_and_runs_hooks() -> None:
    closed: list[str] = []

    async def close() -> None:
        closed.append("closed")

    async def scenario() -> None:
        server = GrpcServer(ServerConfig(shutdown_grace=1.0), "test")
        server.add_service(
            storage_pb2_grpc.add_StorageNodeServicer_to_server,
            storage_pb2_grpc.StorageNodeServicer(),
        )
        server.on_shutdown(close)
        server.request_stop()  # asked before serving even started: honoured at once
        await asyncio.wait_for(server.serve(handle_signals=False), timeout=10)

    asyncio.run(scenario())
    assert closed == ["closed"]

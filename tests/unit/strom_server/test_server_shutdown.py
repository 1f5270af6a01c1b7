"""Graceful shutdown of a real service process started through ``run_service``."""

from __future__ import annotations

import asyncio
import contextlib
import json
import queue
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import grpc.aio
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from strom.protocol.v1 import storage_pb2, storage_pb2_grpc
from strom_server.runner import run_service
from strom_server.runtime.config import ServerConfig

pytestmark = pytest.mark.timeout(60)

SERVICE_SCRIPT = textwrap.dedent(
    """
    import asyncio
    import sys

    from strom.protocol.v1 import storage_pb2, storage_pb2_grpc
    from strom_server.runtime.config import ServerConfig
    from strom_server.runtime.logs import get_logger
    from strom_server.runner import run_service


    class SlowProducer(storage_pb2_grpc.StorageNodeServicer):
        async def ProduceStream(self, request_iterator, context):
            async for request in request_iterator:
                await asyncio.sleep(0.2)
                yield storage_pb2.ProduceResponse(correlation_id=request.correlation_id)


    async def build(config, server):
        server.add_service(storage_pb2_grpc.add_StorageNodeServicer_to_server, SlowProducer())

        async def close_logs():
            get_logger("script").info("hook ran")

        server.on_shutdown(close_logs)


    sys.exit(run_service(ServerConfig, "graceful-test", build))
    """
)


class ServiceProcess:
    """The script as a child process, its stderr JSON events collected by a thread."""

    def __init__(self, script: Path, *args: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(script), "--listen", "127.0.0.1:0", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self._events: queue.Queue[dict[str, object]] = queue.Queue()
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line)
            with contextlib.suppress(json.JSONDecodeError):
                self._events.put(json.loads(line))

    def wait_for_event(self, name: str, timeout_s: float = 20.0) -> dict[str, object]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                event = self._events.get(timeout=0.1)
            except queue.Empty:
                if self.process.poll() is not None:
                    break
                continue
            if event.get("event") == name:
                return event
        raise AssertionError(f"no {name!r} event; output:\n" + "".join(self.lines[-30:]))

    def events(self) -> list[str]:
        return [json.loads(line)["event"] for line in self.lines if line.startswith("{")]


@pytest.fixture
def service(tmp_path: Path) -> Iterator[type[ServiceProcess]]:
    (tmp_path / "service.py").write_text(SERVICE_SCRIPT)
    started: list[ServiceProcess] = []

    class Started(ServiceProcess):
        def __init__(self, *args: str) -> None:
            super().__init__(tmp_path / "service.py", *args)
            started.append(self)

    try:
        yield Started
    finally:
        for proc in started:
            if proc.process.poll() is None:
                proc.process.kill()
            proc.process.wait(timeout=10)


def produce(correlation_id: int) -> storage_pb2.ProduceRequest:
    return storage_pb2.ProduceRequest(correlation_id=correlation_id)


def test_sigterm_lets_an_inflight_stream_finish_then_exits_0(
    service: type[ServiceProcess],
) -> None:
    proc = service("--shutdown-grace", "10")
    port = proc.wait_for_event("listening")["port"]

    async def client() -> None:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            watch = health_pb2_grpc.HealthStub(channel).Watch(
                health_pb2.HealthCheckRequest(service=""), timeout=20
            )
            assert (await watch.read()).status == health_pb2.HealthCheckResponse.SERVING
            call = storage_pb2_grpc.StorageNodeStub(channel).ProduceStream(timeout=20)
            await call.write(produce(1))
            assert (await call.read()).correlation_id == 1

            proc.process.send_signal(signal.SIGTERM)
            assert (await watch.read()).status == health_pb2.HealthCheckResponse.NOT_SERVING
            watch.cancel()
            for correlation_id in (2, 3, 4):  # the in-flight stream goes on during the grace
                await call.write(produce(correlation_id))
            await call.done_writing()
            assert [(await call.read()).correlation_id for _ in range(3)] == [2, 3, 4]
            assert await call.read() is grpc.aio.EOF
            assert await call.code() == grpc.StatusCode.OK

    asyncio.run(client())
    assert proc.process.wait(timeout=20) == 0
    events = proc.events()
    assert events.index("signal received, shutting down") < events.index("hook ran")
    assert events.index("hook ran") < events.index("stopped")


@pytest.mark.parametrize(("grace", "signals"), [("0.5", 1), ("30", 2)])
def test_stuck_stream_is_cut_by_the_grace_or_a_second_signal(
    service: type[ServiceProcess], grace: str, signals: int
) -> None:
    proc = service("--shutdown-grace", grace)
    port = proc.wait_for_event("listening")["port"]

    async def client() -> grpc.StatusCode:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            call = storage_pb2_grpc.StorageNodeStub(channel).ProduceStream(timeout=30)
            await call.write(produce(1))
            await call.read()
            proc.process.send_signal(signal.SIGTERM)
            if signals == 2:
                proc.wait_for_event("stopping")
                proc.process.send_signal(signal.SIGINT)
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await call.read()  # the client never finishes writing: only the server can end it
            return caught.value.code()

    started = time.monotonic()
    code = asyncio.run(client())
    assert code in (grpc.StatusCode.CANCELLED, grpc.StatusCode.UNAVAILABLE)
    assert proc.process.wait(timeout=20) == 0
    assert time.monotonic() - started < 10
    assert "hook ran" in proc.events()


def test_configuration_error_exits_2_with_the_message(capsys: pytest.CaptureFixture[str]) -> None:
    async def build(config: ServerConfig, server: object) -> None:
        raise AssertionError("never built")

    code = run_service(ServerConfig, "strom-test", build, argv=["--listen", "nowhere"])
    assert code == 2
    err = capsys.readouterr().err
    assert "strom-test: configuration error: flag --listen" in err and "'nowhere'" in err

"""Fixtures for the strom_server tests: a real grpc.aio server, captured JSON logs."""

from __future__ import annotations

import io
import logging
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager

import grpc
import grpc.aio
import pytest
from server_testkit import CannedStorageServicer, RunningServer

from strom.protocol.v1 import storage_pb2_grpc
from strom_server.rpc.server import GrpcServer
from strom_server.runtime.config import ServerConfig
from strom_server.runtime.logs import configure_logging
from strom_server.runtime.telemetry import Telemetry


@pytest.fixture
def running_server() -> RunningServer:
    """``async with running_server(config=..., telemetry=...) as (server, channel)``.

    Starts a GrpcServer serving ``CannedStorageServicer`` on 127.0.0.1, port 0, and yields it
    with a connected channel; always stops both.
    """

    @asynccontextmanager
    async def start(
        config: ServerConfig | None = None,
        telemetry: Telemetry | None = None,
        channel_factory: Callable[[str], grpc.aio.Channel] | None = None,
    ) -> AsyncIterator[tuple[GrpcServer, grpc.aio.Channel]]:
        server = GrpcServer(config or ServerConfig(shutdown_grace=1.0), "test", telemetry=telemetry)
        server.add_service(
            storage_pb2_grpc.add_StorageNodeServicer_to_server, CannedStorageServicer()
        )
        await server.start()
        target = f"127.0.0.1:{server.port}"
        channel = channel_factory(target) if channel_factory else grpc.aio.insecure_channel(target)
        try:
            yield server, channel
        finally:
            await channel.close()
            await server.stop(0)

    return start


@pytest.fixture
def log_lines() -> Iterator[Callable[[], list[str]]]:
    """Configure JSON logging (debug) into a buffer; the fixture returns a reader of its lines."""
    buffer = io.StringIO()
    configure_logging("debug", "json", service="test-service", stream=buffer)
    yield lambda: [line for line in buffer.getvalue().splitlines() if line.strip()]
    configure_logging("warning", "json", stream=sys.stderr)
    logging.getLogger().setLevel(logging.WARNING)

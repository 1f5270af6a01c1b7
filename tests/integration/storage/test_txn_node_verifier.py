"""``CoordinatorTxnVerifier`` over real gRPC against small coordinator servicers in this
process: finding the coordinator on any live one (skipping an unreachable address), caching
it, and turning every failure into a refusal, never a success."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import pytest
from strom_testkit import free_port

from strom.errors import (
    CoordinatorNotAvailableError,
    InvalidTxnStateError,
    ProducerFencedError,
    UnknownServerError,
)
from strom.protocol.v1 import (
    common_pb2,
    coordinator_pb2,
    coordinator_pb2_grpc,
    transaction_pb2,
    transaction_pb2_grpc,
)
from strom_storage.txn import CoordinatorTxnVerifier

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

Answer = Callable[[Any], Any]


class Coordinator(
    coordinator_pb2_grpc.GroupCoordinatorServicer,
    transaction_pb2_grpc.TransactionCoordinatorServicer,
):
    """Finds itself; answers AddPartitionsToTxn with ``answer(request)``."""

    def __init__(self, port: int, answer: Answer) -> None:
        self.port = port
        self.answer = answer
        self.finds = 0
        self.verifies = 0

    async def FindCoordinator(self, request: Any, context: Any) -> Any:
        self.finds += 1
        return coordinator_pb2.FindCoordinatorResponse(
            coordinator=common_pb2.Node(node_id=1, host="127.0.0.1", port=self.port)
        )

    async def AddPartitionsToTxn(self, request: Any, context: Any) -> Any:
        self.verifies += 1
        assert request.verify_only
        return self.answer(request)


def per_partition(code: int) -> Answer:
    def answer(request: Any) -> Any:
        return transaction_pb2.AddPartitionsToTxnResponse(
            results=[
                transaction_pb2.AddPartitionsToTxnResult(
                    topic=p.topic,
                    partition=p.partition,
                    error_code=code,  # type: ignore[arg-type]
                )
                for p in request.partitions
            ]
        )

    return answer


def run(
    scenario: Callable[[Callable[..., Awaitable[Coordinator]]], Awaitable[None]],
) -> None:
    async def main() -> None:
        servers: list[grpc.aio.Server] = []

        async def start(answer: Answer, *, transactions: bool = True) -> Coordinator:
            port = free_port()
            server = grpc.aio.server()
            coordinator = Coordinator(port, answer)
            coordinator_pb2_grpc.add_GroupCoordinatorServicer_to_server(coordinator, server)
            if transactions:
                transaction_pb2_grpc.add_TransactionCoordinatorServicer_to_server(
                    coordinator, server
                )
            server.add_insecure_port(f"127.0.0.1:{port}")
            await server.start()
            servers.append(server)
            return coordinator

        try:
            await scenario(start)
        finally:
            for server in servers:
                await server.stop(0)

    asyncio.run(main())


KEYS = [("t", 0), ("t", 1)]


def test_found_on_a_live_coordinator_and_cached() -> None:
    async def scenario(start: Callable[..., Awaitable[Coordinator]]) -> None:
        ok = await start(per_partition(common_pb2.NONE))
        # An unreachable address among the registrations is skipped.
        live = {1: f"127.0.0.1:{free_port()}", 2: f"127.0.0.1:{ok.port}"}
        verifier = CoordinatorTxnVerifier(lambda: live, timeout_s=10)
        try:
            assert await verifier.verify("tid", 5, 0, KEYS) == {("t", 0): None, ("t", 1): None}
            assert await verifier.verify("tid", 5, 0, KEYS[:1]) == {("t", 0): None}
            assert ok.finds == 1 and ok.verifies == 2
        finally:
            await verifier.close()

    run(scenario)


def test_refusals_are_the_coordinators_errors() -> None:
    def mixed(request: Any) -> Any:
        return transaction_pb2.AddPartitionsToTxnResponse(
            results=[
                transaction_pb2.AddPartitionsToTxnResult(
                    topic="t", partition=0, error_code=common_pb2.INVALID_TXN_STATE
                )
            ]  # ("t", 1) left out
        )

    async def scenario(start: Callable[..., Awaitable[Coordinator]]) -> None:
        fenced = await start(
            lambda r: transaction_pb2.AddPartitionsToTxnResponse(
                error_code=common_pb2.PRODUCER_FENCED, error_message="epoch 0 < 1"
            )
        )
        partial = await start(mixed)
        for coordinator, expected in (
            (fenced, [ProducerFencedError, ProducerFencedError]),
            (partial, [InvalidTxnStateError, UnknownServerError]),
        ):
            verifier = CoordinatorTxnVerifier(lambda c=coordinator: {1: f"127.0.0.1:{c.port}"})
            try:
                answers = await verifier.verify("tid", 5, 0, KEYS)
            finally:
                await verifier.close()
            assert [type(answers[key]) for key in KEYS] == expected

    run(scenario)


def test_failures_are_refusals_never_successes() -> None:
    async def scenario(start: Callable[..., Awaitable[Coordinator]]) -> None:
        moving = await start(per_partition(common_pb2.NOT_COORDINATOR))
        no_txn = await start(per_partition(common_pb2.NONE), transactions=False)
        verifier = CoordinatorTxnVerifier(lambda: {1: f"127.0.0.1:{moving.port}"}, timeout_s=0.5)
        try:
            answers = await verifier.verify("tid", 5, 0, KEYS)
        finally:
            await verifier.close()
        assert all(isinstance(e, CoordinatorNotAvailableError) for e in answers.values())
        assert moving.verifies >= 2  # asked again, finding it again each time
        verifier = CoordinatorTxnVerifier(lambda: {1: f"127.0.0.1:{no_txn.port}"})
        try:
            answers = await verifier.verify("tid", 5, 0, KEYS)
        finally:
            await verifier.close()
        assert all(isinstance(e, UnknownServerError) for e in answers.values())
        nobody = CoordinatorTxnVerifier(dict, timeout_s=5)
        answers = await nobody.verify("tid", 5, 0, KEYS)
        assert all(isinstance(e, CoordinatorNotAvailableError) for e in answers.values())
        assert "no coordinator is registered" in str(answers[("t", 0)])

    run(scenario)

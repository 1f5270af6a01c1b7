"""The gRPC TransactionCoordinator service: decode, one call on ``TransactionManager``, encode.

Every failure is answered in the response's error fields (repeated per partition for
AddPartitionsToTxn, per id for DescribeTransactions); an unexpected exception becomes
UNKNOWN_SERVER_ERROR and is logged.
"""

from __future__ import annotations

from collections.abc import Iterable

from strom.errors import BrokerResponseError
from strom.protocol.v1 import common_pb2, controller_pb2
from strom.protocol.v1 import transaction_pb2 as pb
from strom.protocol.v1.transaction_pb2_grpc import TransactionCoordinatorServicer as _Base
from strom.types import StagedTransaction
from strom_coordinator.answers import answer, top_level_error
from strom_coordinator.txn.manager import TransactionManager
from strom_coordinator.txn.staged import Decision
from strom_server.rpc.errors import error_fields
from strom_server.rpc.server import ServicerContext as Ctx

__all__ = ["TransactionCoordinatorServicer"]


class TransactionCoordinatorServicer(_Base):
    def __init__(self, manager: TransactionManager, coordinator_id: int) -> None:
        self._m = manager
        self._coordinator_id = coordinator_id

    async def InitProducerId(
        self, request: controller_pb2.InitProducerIdRequest, context: Ctx
    ) -> controller_pb2.InitProducerIdResponse:
        async def work() -> controller_pb2.InitProducerIdResponse:
            producer_id, epoch = await self._m.init_producer_id(
                request.transactional_id,
                request.transaction_timeout_ms,
                request.producer_id,
                request.producer_epoch,
            )
            return controller_pb2.InitProducerIdResponse(
                producer_id=producer_id, producer_epoch=epoch
            )

        def fail(e: BrokerResponseError) -> controller_pb2.InitProducerIdResponse:
            code, message = error_fields(e)
            return controller_pb2.InitProducerIdResponse(
                error_code=code, error_message=message, producer_id=-1, producer_epoch=-1
            )

        return await answer("InitProducerId", work, fail)

    async def AddPartitionsToTxn(
        self, request: pb.AddPartitionsToTxnRequest, context: Ctx
    ) -> pb.AddPartitionsToTxnResponse:
        partitions = [(tp.topic, tp.partition) for tp in request.partitions]

        async def work() -> pb.AddPartitionsToTxnResponse:
            args = (request.transactional_id, request.producer_id, request.producer_epoch)
            if request.verify_only:
                results = await self._m.verify_partitions(*args, partitions)
                return pb.AddPartitionsToTxnResponse(
                    results=[_result(r.topic, r.partition, r.error) for r in results]
                )
            await self._m.add_partitions(*args, partitions)
            return pb.AddPartitionsToTxnResponse(
                results=[_result(t, p, None) for t, p in partitions]
            )

        def fail(e: BrokerResponseError) -> pb.AddPartitionsToTxnResponse:
            code, message = error_fields(e)
            return pb.AddPartitionsToTxnResponse(
                error_code=code,
                error_message=message,
                results=[_result(t, p, e) for t, p in partitions],
            )

        return await answer("AddPartitionsToTxn", work, fail)

    async def AddOffsetsToTxn(
        self, request: pb.AddOffsetsToTxnRequest, context: Ctx
    ) -> pb.AddOffsetsToTxnResponse:
        async def work() -> pb.AddOffsetsToTxnResponse:
            await self._m.add_offsets(
                request.transactional_id,
                request.producer_id,
                request.producer_epoch,
                request.group_id,
            )
            return pb.AddOffsetsToTxnResponse()

        return await answer("AddOffsetsToTxn", work, top_level_error(pb.AddOffsetsToTxnResponse))

    async def EndTxn(self, request: pb.EndTxnRequest, context: Ctx) -> pb.EndTxnResponse:
        async def work() -> pb.EndTxnResponse:
            producer_id, epoch = await self._m.end_txn(
                request.transactional_id,
                request.producer_id,
                request.producer_epoch,
                request.committed,
                keep_epoch=request.keep_epoch,
            )
            return pb.EndTxnResponse(producer_id=producer_id, producer_epoch=epoch)

        def fail(e: BrokerResponseError) -> pb.EndTxnResponse:
            code, message = error_fields(e)
            return pb.EndTxnResponse(
                error_code=code, error_message=message, producer_id=-1, producer_epoch=-1
            )

        return await answer("EndTxn", work, fail)

    async def ListTransactions(
        self, request: pb.ListTransactionsRequest, context: Ctx
    ) -> pb.ListTransactionsResponse:
        async def work() -> pb.ListTransactionsResponse:
            listed = await self._m.list_transactions(
                list(request.state_filters),
                list(request.producer_id_filters),
                request.duration_filter_ms,
                request.transactional_id_prefix,
            )
            return pb.ListTransactionsResponse(
                transactions=[
                    pb.ListedTransaction(
                        transactional_id=t.transactional_id,
                        producer_id=t.producer_id,
                        state=t.state,
                    )
                    for t in listed
                ]
            )

        return await answer("ListTransactions", work, top_level_error(pb.ListTransactionsResponse))

    async def DescribeTransactions(
        self, request: pb.DescribeTransactionsRequest, context: Ctx
    ) -> pb.DescribeTransactionsResponse:
        async def work() -> pb.DescribeTransactionsResponse:
            described = await self._m.describe_transactions(list(request.transactional_ids))
            out = []
            for d in described:
                code, message = error_fields(d.error)
                entry = pb.DescribedTransaction(
                    error_code=code,
                    error_message=message,
                    transactional_id=d.transactional_id,
                    coordinator_id=self._coordinator_id,
                )
                meta = d.metadata
                if meta is not None:
                    entry.state = meta.state.value
                    entry.transaction_timeout_ms = meta.timeout_ms
                    entry.transaction_start_time_ms = meta.start_ms
                    entry.producer_id = meta.producer_id
                    entry.producer_epoch = meta.producer_epoch
                    entry.partitions.extend(
                        common_pb2.TopicPartition(topic=t, partition=p)
                        for t, p in sorted(meta.partitions)
                    )
                    entry.group_ids.extend(sorted(meta.groups))
                else:
                    entry.state = "Dead"
                    entry.transaction_start_time_ms = -1
                    entry.producer_id = -1
                    entry.producer_epoch = -1
                out.append(entry)
            return pb.DescribeTransactionsResponse(transactions=out)

        def fail(e: BrokerResponseError) -> pb.DescribeTransactionsResponse:
            code, message = error_fields(e)
            return pb.DescribeTransactionsResponse(
                transactions=[
                    pb.DescribedTransaction(
                        error_code=code, error_message=message, transactional_id=tid
                    )
                    for tid in request.transactional_ids
                ]
            )

        return await answer("DescribeTransactions", work, fail)

    async def CommitStagedTransactions(
        self, request: pb.CommitStagedTransactionsRequest, context: Ctx
    ) -> pb.CommitStagedTransactionsResponse:
        async def work() -> pb.CommitStagedTransactionsResponse:
            already, decision = await self._m.staged.commit(
                request.commit_id,
                request.sequence,
                [_member(m) for m in request.members],
                bytes(request.metadata),
            )
            return pb.CommitStagedTransactionsResponse(
                already_committed=already, commit=_decision(decision)
            )

        return await answer(
            "CommitStagedTransactions",
            work,
            top_level_error(pb.CommitStagedTransactionsResponse),
        )

    async def DescribeStagedCommit(
        self, request: pb.DescribeStagedCommitRequest, context: Ctx
    ) -> pb.DescribeStagedCommitResponse:
        async def work() -> pb.DescribeStagedCommitResponse:
            decision = self._m.staged.describe(request.commit_id)
            if decision is None:
                return pb.DescribeStagedCommitResponse(
                    found=False, commit=pb.StagedCommit(commit_id=request.commit_id, sequence=-1)
                )
            return pb.DescribeStagedCommitResponse(found=True, commit=_decision(decision))

        return await answer(
            "DescribeStagedCommit", work, top_level_error(pb.DescribeStagedCommitResponse)
        )


def _member(m: pb.StagedTransaction) -> StagedTransaction:
    return StagedTransaction(m.transactional_id, m.producer_id, m.producer_epoch)


def _members(members: Iterable[StagedTransaction]) -> list[pb.StagedTransaction]:
    return [
        pb.StagedTransaction(
            transactional_id=m.transactional_id,
            producer_id=m.producer_id,
            producer_epoch=m.producer_epoch,
        )
        for m in members
    ]


def _decision(d: Decision) -> pb.StagedCommit:
    return pb.StagedCommit(
        commit_id=d.commit_id,
        sequence=d.sequence,
        state=d.state.value,
        members=_members(d.members),
        metadata=d.metadata,
        failed_members=_members(d.failed_members),
        last_update_ms=d.last_update_ms,
    )


def _result(
    topic: str, partition: int, error: BrokerResponseError | None
) -> pb.AddPartitionsToTxnResult:
    code, message = error_fields(error)
    return pb.AddPartitionsToTxnResult(
        topic=topic, partition=partition, error_code=code, error_message=message
    )

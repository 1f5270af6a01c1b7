"""The coordinator runtime without a cluster: which shard each internal topic's etcd keys
reach, which coordinator serves a key of a topic (``locate``, what peers are called by), the
order ``close`` stops things in, which answers of a peer mean it is moving and how a call to a
peer is asked again while it moves. Nothing here connects: etcd and the gateway are never asked
(the clients connect lazily)."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from strom.cluster import ClusterClient
from strom.errors import CoordinatorNotAvailableError
from strom.protocol.v1 import common_pb2 as E
from strom.protocol.v1 import transaction_pb2
from strom_coordinator.config import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from strom_coordinator.group import records as group_records
from strom_coordinator.group.config import GroupConfig
from strom_coordinator.group.manager import GroupManager
from strom_coordinator.runtime.ownership import (
    TopicOwnership,
    offsets_ownership,
    transaction_ownership,
)
from strom_coordinator.runtime.peers import PeerCoordinators
from strom_coordinator.runtime.registration import CoordinatorRegistration
from strom_coordinator.runtime.runtime import CoordinatorRuntime, HostedTopic
from strom_coordinator.runtime.shard import ShardContext
from strom_coordinator.txn import records as txn_records
from strom_coordinator.txn.completion import MarkerJob
from strom_coordinator.txn.manager import TransactionManager, TxnConfig
from strom_server.etcd.keys import ClusterKeys, encode_value
from strom_server.etcd.store import EtcdStore, KeyValue
from strom_server.rpc.errors import coordinator_moving as moving

KEYS = ClusterKeys("/strom")
_revisions = itertools.count(1)


class _NoMarkers:
    async def write(self, job: MarkerJob) -> None:
        raise AssertionError("no transaction ends in these tests")


async def _no_producer_id() -> int:
    raise AssertionError("no producer id is needed in these tests")


def _offsets() -> TopicOwnership:
    return offsets_ownership(KEYS, group_records.ownership_marker)


def _runtime() -> tuple[
    CoordinatorRuntime, HostedTopic[GroupManager], HostedTopic[TransactionManager]
]:
    registration = CoordinatorRegistration(
        EtcdStore(["127.0.0.1:1"]), KEYS, coordinator_id=1, ttl_s=9
    )
    cluster = ClusterClient("127.0.0.1:1")
    runtime = CoordinatorRuntime(registration, cluster, write_timeout_s=1, request_timeout_s=1)
    groups = runtime.host(_offsets(), lambda ctx: GroupManager(ctx.log, GroupConfig()))

    def transactions(ctx: ShardContext) -> TransactionManager:
        return TransactionManager(
            ctx.log, TxnConfig(), fresh_producer_id=_no_producer_id,
            group_partition_for=groups.shard.partition_for, markers=_NoMarkers(),
            coordinator_epoch=ctx.owner_epoch, on_fenced=ctx.fenced,
        )  # fmt: skip

    txns = runtime.host(transaction_ownership(KEYS, txn_records.ownership_marker), transactions)
    return runtime, groups, txns


def _put(runtime: CoordinatorRuntime, key: str, value: dict[str, object]) -> None:
    revision = next(_revisions)
    runtime.registration.absorb("put", KeyValue(key, encode_value(value), revision, revision))


def _topic(runtime: CoordinatorRuntime, topic: str, partitions: int) -> None:
    assignment = {str(p): [1] for p in range(partitions)}
    _put(runtime, KEYS.topic(topic), {"partitions": assignment, "configs": {}})


def _member(runtime: CoordinatorRuntime, coordinator_id: int, port: int) -> None:
    _put(runtime, KEYS.coordinator(coordinator_id), {"host": "127.0.0.1", "port": port})


def test_each_topics_keys_reach_its_own_shard() -> None:
    async def main() -> None:
        runtime, groups, txns = _runtime()
        assert runtime.topics == [OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC]
        assert runtime.hosted(OFFSETS_TOPIC) is groups
        assert runtime.hosted(TRANSACTION_STATE_TOPIC) is txns
        assert groups.ownership.host is groups.shard and txns.ownership.host is txns.shard
        assert groups.writer.topic == OFFSETS_TOPIC and txns.writer.topic == TRANSACTION_STATE_TOPIC

        _topic(runtime, OFFSETS_TOPIC, 3)
        assert groups.shard.partition_count == 3 and txns.shard.partition_count is None
        _topic(runtime, TRANSACTION_STATE_TOPIC, 5)
        assert (groups.shard.partition_count, txns.shard.partition_count) == (3, 5)

        _put(runtime, KEYS.transaction_owner(1), {"coordinator_id": 2, "epoch": 7})
        assert set(txns.ownership.owners) == {1} and not groups.ownership.owners

    asyncio.run(main())


def test_a_topic_is_hosted_once() -> None:
    async def main() -> None:
        runtime, _, _ = _runtime()
        with pytest.raises(ValueError, match="__consumer_offsets is hosted already"):
            runtime.host(_offsets(), lambda ctx: GroupManager(ctx.log, GroupConfig()))

    asyncio.run(main())


def test_locate_names_the_registered_owner_of_the_keys_partition_in_its_topic() -> None:
    async def main() -> None:
        runtime, groups, txns = _runtime()
        key = "orders"
        assert runtime.locate(OFFSETS_TOPIC, key) is None  # the partition count is unknown
        assert runtime.locate("unknown-topic", key) is None
        _topic(runtime, OFFSETS_TOPIC, 3)
        _topic(runtime, TRANSACTION_STATE_TOPIC, 5)
        group_partition = groups.shard.partition_for(key)
        txn_partition = txns.shard.partition_for(key)
        assert runtime.locate(OFFSETS_TOPIC, key) is None  # no owner yet

        _put(runtime, KEYS.coordinator_owner(group_partition), {"coordinator_id": 2, "epoch": 4})
        assert runtime.locate(OFFSETS_TOPIC, key) is None  # the owner is not registered
        _member(runtime, 2, 9102)
        _member(runtime, 3, 9103)
        assert runtime.locate(OFFSETS_TOPIC, key) == ("127.0.0.1:9102", group_partition)
        # The same string as a transactional id: its own topic's partition and owner.
        assert runtime.locate(TRANSACTION_STATE_TOPIC, key) is None
        _put(runtime, KEYS.transaction_owner(txn_partition), {"coordinator_id": 3, "epoch": 5})
        assert runtime.locate(TRANSACTION_STATE_TOPIC, key) == ("127.0.0.1:9103", txn_partition)

        revision = next(_revisions)  # the owner's registration goes (its lease expired)
        runtime.registration.absorb("delete", KeyValue(KEYS.coordinator(3), b"", 0, revision))
        assert runtime.locate(TRANSACTION_STATE_TOPIC, key) is None
        assert runtime.owner_epoch(TRANSACTION_STATE_TOPIC, txn_partition) is None  # not ours

    asyncio.run(main())


def test_close_stops_ticks_and_placement_before_the_shards_and_revokes_before_the_writers() -> None:
    async def main() -> None:
        runtime, _, _ = _runtime()
        assert [what for what, _ in runtime.close_plan()] == [
            "stop the ticks",
            "stop following etcd",
            "stop placing __consumer_offsets",
            "stop placing __transaction_state",
            "close the __consumer_offsets shard",
            "close the __transaction_state shard",
            "revoke the lease",
            "close the __consumer_offsets writer",
            "close the __transaction_state writer",
            "close the channels to the peers",
        ]

    asyncio.run(main())


def test_a_peers_answer_is_moving_when_it_or_any_item_names_a_coordinator_problem() -> None:
    assert not moving(transaction_pb2.EndTxnResponse(error_code=E.NONE))
    assert not moving(transaction_pb2.EndTxnResponse(error_code=E.PRODUCER_FENCED))
    assert moving(transaction_pb2.EndTxnResponse(error_code=E.NOT_COORDINATOR))
    described = transaction_pb2.DescribeTransactionsResponse(
        transactions=[
            transaction_pb2.DescribedTransaction(transactional_id="a"),
            transaction_pb2.DescribedTransaction(
                transactional_id="b", error_code=E.COORDINATOR_LOAD_IN_PROGRESS
            ),
        ]
    )
    assert moving(described)
    del described.transactions[1]
    assert not moving(described)


class _Peer:
    """A TransactionCoordinator stub answering EndTxn with ``codes`` in turn (the last one
    again and again)."""

    def __init__(self, *codes: int) -> None:
        self.codes = list(codes)
        self.calls = 0

    async def EndTxn(self, request: object, **call: object) -> transaction_pb2.EndTxnResponse:
        self.calls += 1
        code = self.codes.pop(0) if len(self.codes) > 1 else self.codes[0]
        return transaction_pb2.EndTxnResponse(error_code=code)  # type: ignore[arg-type]


def _peers(peer: _Peer | None) -> PeerCoordinators:
    located = None if peer is None else ("127.0.0.1:1", 0)
    peers = PeerCoordinators(lambda topic, key: located)
    peers.transactions = lambda address: peer  # type: ignore[assignment,method-assign,return-value]
    return peers


def test_a_peer_call_is_asked_again_while_the_ids_coordinator_moves() -> None:
    async def main() -> None:
        request = transaction_pb2.EndTxnRequest(transactional_id="app")
        peer = _Peer(E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS, E.NONE)
        answer = await _peers(peer).call_transaction("app", "EndTxn", request, timeout_s=5)
        assert (answer.error_code, peer.calls) == (E.NONE, 3)
        # Still moving at the deadline: the last answer.
        peer = _Peer(E.NOT_COORDINATOR)
        answer = await _peers(peer).call_transaction("app", "EndTxn", request, timeout_s=0.1)
        assert answer.error_code == E.NOT_COORDINATOR and peer.calls > 1
        # A final answer is not asked again.
        peer = _Peer(E.PRODUCER_FENCED, E.NONE)
        answer = await _peers(peer).call_transaction("app", "EndTxn", request, timeout_s=5)
        assert (answer.error_code, peer.calls) == (E.PRODUCER_FENCED, 1)
        # Never located: COORDINATOR_NOT_AVAILABLE once the time is up.
        with pytest.raises(CoordinatorNotAvailableError, match="its coordinator is unknown"):
            await _peers(None).call_transaction("app", "EndTxn", request, timeout_s=0.1)

    asyncio.run(main())

"""The consumer's group membership without a server: option validation, the rebalance steps
run in ``poll`` (revoke, lost, assign), how coordinator answers change the membership, commit
errors, and the sync facade running listener calls in the calling thread."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from strom import Consumer
from strom.aio import Consumer as AioConsumer
from strom.consumer._coordinator import ConsumerCoordinator, JoinResult, call_listener
from strom.consumer._join_protocol import join_protocols, leader_assignment, member_subscriptions
from strom.consumer._offset_commits import commit_offsets
from strom.consumer.consumer import _CallerThreadListener
from strom.errors import (
    ConfigurationError,
    FencedInstanceIdError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from strom.group import (
    Assignment,
    PartitionAssignor,
    RangeAssignor,
    RebalanceProtocol,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_subscription,
)
from strom.protocol.v1 import common_pb2, coordinator_pb2
from strom.types import OffsetAndMetadata, TopicPartition

E = common_pb2.ErrorCode
T0, T1, T2 = (TopicPartition("t", p) for p in range(3))
U0 = TopicPartition("u", 0)
NOWHERE = "127.0.0.1:1"  # nothing listens: these tests never reach the network


class Recorder:
    def __init__(self, *, lost: bool = True) -> None:
        self.calls: list[tuple[str, set[TopicPartition]]] = []
        if lost:
            self.on_partitions_lost = lambda ps: self.calls.append(("lost", set(ps)))

    def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None:
        self.calls.append(("revoked", set(partitions)))

    async def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None:
        self.calls.append(("assigned", set(partitions)))


def run(scenario: Callable[[AioConsumer, ConsumerCoordinator], Any], **options: Any) -> Any:
    async def main() -> Any:
        options.setdefault("group_id", "g")
        options.setdefault("enable_auto_commit", False)
        consumer = AioConsumer(bootstrap_servers=NOWHERE, **options)
        coordinator = consumer._coordinator
        assert coordinator is not None
        try:
            return await scenario(consumer, coordinator)
        finally:
            coordinator.generation = -1  # closing must not try to leave a group
            coordinator.member_id = ""
            await consumer.close()

    return asyncio.run(main())


def member(coordinator: ConsumerCoordinator, owned: list[TopicPartition]) -> None:
    """Make ``coordinator`` a member of generation 3 owning ``owned``."""
    coordinator.generation, coordinator.member_id = 3, "m-1"
    coordinator._stable = True
    coordinator._subs.set_subscribed_assignment(owned)


# -- options -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({"session_timeout_ms": 0}, "session_timeout_ms"),
        ({"heartbeat_interval_ms": 45000}, "lower than session_timeout_ms"),
        ({"heartbeat_interval_ms": True}, "heartbeat_interval_ms"),
        ({"max_poll_interval_ms": 0}, "max_poll_interval_ms"),
        ({"rebalance_timeout_ms": -1}, "rebalance_timeout_ms"),
        ({"session_timeout_ms": 2**31, "heartbeat_interval_ms": 3000}, "32 bits"),
        ({"group_instance_id": ""}, "group_instance_id"),
        ({"group_instance_id": "a b"}, "group_instance_id"),
        ({"group_instance_id": "i-1", "group_id": None}, "needs a group_id"),
        ({"partition_assignment_strategy": []}, "partition_assignment_strategy"),
        ({"partition_assignment_strategy": ["nope"]}, "nope"),
        ({"partition_assignment_strategy": ["range", "range"]}, "twice"),
        ({"enable_auto_commit": "yes"}, "enable_auto_commit"),
        ({"auto_commit_interval_ms": 0}, "auto_commit_interval_ms"),
        ({"group_id": ""}, "group_id"),
    ],
)
def test_invalid_group_options_name_the_option(options: dict[str, Any], fragment: str) -> None:
    options.setdefault("group_id", "g")
    with pytest.raises(ConfigurationError, match=fragment):
        AioConsumer(bootstrap_servers=NOWHERE, **options)


def test_protocol_is_cooperative_only_when_every_assignor_supports_it() -> None:
    async def default(c: AioConsumer, co: ConsumerCoordinator) -> None:
        assert [a.name for a in co.options.assignors] == ["range", "cooperative-sticky"]
        assert co.options.protocol is RebalanceProtocol.EAGER
        assert co.options.rebalance_timeout_ms == co.options.max_poll_interval_ms == 300000
        assert (co.options.session_timeout_ms, co.options.heartbeat_interval_ms) == (45000, 3000)

    async def cooperative(c: AioConsumer, co: ConsumerCoordinator) -> None:
        assert co.options.protocol is RebalanceProtocol.COOPERATIVE
        assert co.is_cooperative

    async def instance(c: AioConsumer, co: ConsumerCoordinator) -> None:
        assert co.options.assignors == (mine,)
        assert co.options.rebalance_timeout_ms == 1234

    mine = RangeAssignor()
    run(default)
    run(cooperative, partition_assignment_strategy="cooperative-sticky")
    run(instance, partition_assignment_strategy=[mine], rebalance_timeout_ms=1234)


# -- before a join: revoke or lose ---------------------------------------------------------------


def test_eager_revokes_everything_before_joining() -> None:
    listener = Recorder()

    async def scenario(c: AioConsumer, co: ConsumerCoordinator) -> None:
        c.subscribe(["t"], listener=listener)
        member(co, [T0, T1])
        assert await co._prepare_join() is None
        assert listener.calls == [("revoked", {T0, T1})]
        assert c.assignment() == set()
        assert co.generation == 3  # still a member: the JoinGroup carries its id

    run(scenario)


def test_cooperative_keeps_partitions_of_still_subscribed_topics() -> None:
    listener = Recorder()

    async def scenario(c: AioConsumer, co: ConsumerCoordinator) -> None:
        c.subscribe(["t"], listener=listener)
        member(co, [T0, U0])
        await co._prepare_join()
        assert listener.calls == [("revoked", {U0})]
        assert c.assignment() == {T0}

    run(scenario, partition_assignment_strategy=["cooperative-sticky"])


@pytest.mark.parametrize("has_lost", [True, False])
def test_a_reset_generation_loses_partitions_without_committing(has_lost: bool) -> None:
    listener = Recorder(lost=has_lost)

    async def scenario(c: AioConsumer, co: ConsumerCoordinator) -> None:
        c.subscribe(["t"], listener=listener)
        member(co, [T0])
        c._subs.state(T0).seek(10)
        co.on_heartbeat_error(E.UNKNOWN_MEMBER_ID, "")
        assert (co.generation, co.member_id) == (-1, "")
        # Auto-commit is on: a commit would need the (unreachable) coordinator and fail loudly.
        await co._prepare_join()
        assert listener.calls == [("lost" if has_lost else "revoked", {T0})]
        assert c.assignment() == set()

    run(scenario, enable_auto_commit=True)


# -- applying a new assignment -------------------------------------------------------------------


def result(partitions: list[TopicPartition], generation: int = 4, **kw: Any) -> JoinResult:
    defaults: dict[str, Any] = {
        "member_id": "m-1",
        "protocol": "cooperative-sticky",
        "leader": False,
        "topics": frozenset({"t"}),
    }
    defaults.update(kw)
    return JoinResult(generation=generation, assignment=Assignment(partitions), **defaults)


def test_cooperative_assignment_revokes_only_what_moved_then_rejoins() -> None:
    listener = Recorder()

    async def scenario(c: AioConsumer, co: ConsumerCoordinator) -> None:
        c.subscribe(["t"], listener=listener)
        member(co, [T0, T1])
        kept = c._subs.state(T1)
        kept.seek(7)
        co._rejoin_needed = False
        await co._apply(result([T1, T2]))
        assert listener.calls == [("revoked", {T0}), ("assigned", {T2})]
        assert c.assignment() == {T1, T2}
        assert c._subs.state(T1) is kept and kept.position == 7  # kept consuming where it was
        assert c._subs.state(T2).awaiting_committed  # position from the committed offset
        assert co._rejoin_needed  # the follow-up rebalance hands out what was revoked

    run(scenario, partition_assignment_strategy=["cooperative-sticky"])


def test_eager_assignment_reports_every_partition_and_no_rejoin() -> None:
    listener = Recorder()

    async def scenario(c: AioConsumer, co: ConsumerCoordinator) -> None:
        c.subscribe(["t"], listener=listener)
        member(co, [])
        co._rejoin_needed = False
        await co._apply(result([T0, T2], protocol="range"))
        assert listener.calls == [("assigned", {T0, T2})]
        assert not co._rejoin_needed
        # A new partition neither fetches nor resets until its committed offset is known...
        st = c._subs.state(T0)
        assert st.awaiting_committed and st.reset is None
        assert c._subs.fetchable(0.0, 1 << 20) == []
        c._collector.raise_pending()  # ...and is not an error meanwhile
        c.seek(T0, 3)  # a seek (say in the listener) wins over the committed offset
        assert not st.awaiting_committed and st.position == 3

    run(scenario)


def test_a_subscription_change_during_the_rebalance_rejoins() -> None:
    async def scenario(c: AioConsumer, co: ConsumerCoordinator) -> None:
        c.subscribe(["t", "u"])
        member(co, [])
        co._rejoin_needed = False
        await co._apply(result([T0], protocol="range", topics=frozenset({"t"})))
        assert co._rejoin_needed

    run(scenario)


def test_listener_errors_surface_after_the_step_completes() -> None:
    class Failing:
        def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None:
            raise ValueError("boom")

    async def scenario(c: AioConsumer, co: ConsumerCoordinator) -> None:
        c.subscribe(["t"], listener=Failing())
        member(co, [])
        with pytest.raises(ValueError, match="boom"):
            await co._apply(result([T0], protocol="range"))
        assert c.assignment() == {T0}  # the assignment was taken all the same

    run(scenario)


def test_call_listener_plain_async_and_lost_fallback() -> None:
    listener = Recorder(lost=False)

    async def calls() -> None:
        await call_listener(listener, "on_partitions_lost", [T0])
        await call_listener(listener, "on_partitions_assigned", [T1])
        await call_listener(object(), "on_partitions_revoked", [T1])  # no such method

    asyncio.run(calls())
    assert listener.calls == [("revoked", {T0}), ("assigned", {T1})]


# -- what coordinator answers do -----------------------------------------------------------------


def test_heartbeat_answers() -> None:
    async def scenario(c: AioConsumer, co: ConsumerCoordinator) -> None:
        c.subscribe(["t"])
        member(co, [T0])
        co._rejoin_needed = False
        co.on_heartbeat_error(E.NONE, "")
        assert not co._rejoin_needed
        co.on_heartbeat_error(E.REBALANCE_IN_PROGRESS, "")
        assert co._rejoin_needed and co.generation == 3  # revoke (and commit) first: still valid
        member(co, [T0])
        co.on_heartbeat_error(E.ILLEGAL_GENERATION, "")
        assert (co.generation, co.member_id) == (-1, "m-1")  # rejoins with its member id
        member(co, [T0])
        co.on_heartbeat_error(E.UNKNOWN_MEMBER_ID, "")
        assert (co.generation, co.member_id) == (-1, "")
        member(co, [T0])
        co.on_heartbeat_error(E.FENCED_INSTANCE_ID, "instance i-1 rejoined")
        with pytest.raises(FencedInstanceIdError, match="i-1"):
            await co.poll()
        with pytest.raises(FencedInstanceIdError):  # fatal: every later poll too
            await co.poll()

    run(scenario, group_instance_id="i-1")


def test_commit_during_a_rebalance_or_after_leaving() -> None:
    async def scenario(c: AioConsumer, co: ConsumerCoordinator) -> None:
        c.subscribe(["t"])
        member(co, [T0])
        offsets = {T0: (OffsetAndMetadata(5), -1)}
        co._joining = asyncio.get_running_loop().create_future()  # type: ignore[assignment]
        with pytest.raises(RebalanceInProgressError, match="rebalancing") as info:
            await co.commit(offsets)
        assert info.value.retriable
        co._joining = None
        co.on_heartbeat_error(E.UNKNOWN_MEMBER_ID, "")
        with pytest.raises(IllegalGenerationError, match="max_poll_interval_ms") as failed:
            await c.commit({T0: 5})
        assert not failed.value.retriable

    run(scenario)


def test_commit_errors_from_the_coordinator() -> None:
    async def scenario(c: AioConsumer, co: ConsumerCoordinator) -> None:
        c.subscribe(["t"])
        member(co, [T0])
        co._rejoin_needed = False
        error = co._commit_error(E.REBALANCE_IN_PROGRESS, "", 3, "m-1")
        assert isinstance(error, RebalanceInProgressError) and co._rejoin_needed
        assert co.generation == 3
        error = co._commit_error(E.ILLEGAL_GENERATION, "", 3, "m-1")
        assert isinstance(error, IllegalGenerationError) and "commit failed" in str(error)
        assert (co.generation, co.member_id) == (-1, "m-1")
        member(co, [T0])
        error = co._commit_error(E.UNKNOWN_MEMBER_ID, "", 3, "m-1")
        assert isinstance(error, UnknownMemberIdError)
        assert (co.generation, co.member_id) == (-1, "")
        member(co, [T0])
        # An answer about an older generation does not reset the current one.
        co._commit_error(E.ILLEGAL_GENERATION, "", 2, "m-1")
        assert co.generation == 3
        error = co._commit_error(E.FENCED_INSTANCE_ID, "", 3, "m-1")
        assert isinstance(error, FencedInstanceIdError) and co._fatal is error

    run(scenario)


def test_join_errors_reset_or_raise() -> None:
    async def scenario(c: AioConsumer, co: ConsumerCoordinator) -> None:
        member(co, [])
        co._join_error(E.ILLEGAL_GENERATION, "", "JoinGroup")
        assert (co.generation, co.member_id) == (-1, "m-1")
        co._join_error(E.UNKNOWN_MEMBER_ID, "", "SyncGroup")
        assert co.member_id == ""
        co._join_error(E.COORDINATOR_LOAD_IN_PROGRESS, "", "JoinGroup")  # retried
        with pytest.raises(InconsistentGroupProtocolError, match="JoinGroup failed"):
            co._join_error(E.INCONSISTENT_GROUP_PROTOCOL, "no common assignor", "JoinGroup")
        with pytest.raises(FencedInstanceIdError):
            co._join_error(E.FENCED_INSTANCE_ID, "", "JoinGroup")
        assert co._fatal is not None

    run(scenario)


def test_commit_offsets_carry_the_position_epoch() -> None:
    async def scenario(c: AioConsumer, co: ConsumerCoordinator) -> None:
        c.assign([T0, T1])
        c._subs.state(T0).seek(8)
        c._subs.state(T0).position_epoch = 2
        prepared = commit_offsets(c._subs.assignment, None)
        assert prepared == {T0: (OffsetAndMetadata(8), 2)}  # T1 has no position yet
        assert commit_offsets(c._subs.assignment, {T0: 5, T1: OffsetAndMetadata(1, "m")}) == {
            T0: (OffsetAndMetadata(5), -1),
            T1: (OffsetAndMetadata(1, "m"), -1),
        }
        with pytest.raises(ConfigurationError, match="t-0"):
            commit_offsets(c._subs.assignment, {T0: -1})

    run(scenario)


# -- the sync facade -----------------------------------------------------------------------------


def test_sync_listener_runs_in_the_calling_thread() -> None:
    seen: list[tuple[str, set[TopicPartition], threading.Thread]] = []

    class Listener:
        def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None:
            seen.append(("assigned", partitions, threading.current_thread()))

        def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None:
            raise ValueError("listener failed")

    consumer = Consumer(bootstrap_servers=NOWHERE, group_id="g", enable_auto_commit=False)
    try:
        adapter = _CallerThreadListener(Listener(), consumer._inbox)

        async def rebalance() -> int:
            await adapter.on_partitions_assigned({T0})
            with pytest.raises(ValueError, match="listener failed"):
                await adapter.on_partitions_lost({T0})  # falls back to on_partitions_revoked
            return 7

        assert consumer._run_with_listener(rebalance()) == 7
        assert seen == [("assigned", {T0}, threading.current_thread())]
    finally:
        consumer.close()


# -- the consumer protocol in JoinGroup / SyncGroup ----------------------------------------------


class InlineRange(PartitionAssignor):
    """A tiny range assignment, enough to check what the leader sends."""

    name = "inline-range"

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, Assignment]:
        members = sorted(subscriptions)
        out: dict[str, list[TopicPartition]] = {m: [] for m in members}
        for topic, count in sorted(partitions_per_topic.items()):
            takers = [m for m in members if topic in subscriptions[m].topics]
            for p in range(count):
                out[takers[p * len(takers) // count]].append(TopicPartition(topic, p))
        return {m: Assignment(ps) for m, ps in out.items()}


def test_join_protocols_and_the_leader_s_assignment() -> None:
    assignor = InlineRange()
    (protocol,) = join_protocols([assignor], {"t", "u"}, [T1], generation=5)
    assert protocol.name == "inline-range"
    mine = decode_subscription(protocol.metadata)
    assert (mine.topics, mine.owned_partitions, mine.generation_id) == (["t", "u"], [T1], 5)
    other = Subscription(topics=["t"])
    members = [
        coordinator_pb2.JoinGroupMember(member_id="m-1", metadata=protocol.metadata),
        coordinator_pb2.JoinGroupMember(member_id="m-2", metadata=encode_subscription(other)),
    ]
    subscriptions = member_subscriptions(members)
    assert subscriptions["m-2"].topics == ["t"]
    sync = leader_assignment(assignor, {"t": 4, "u": 1}, subscriptions)
    shares = {a.member_id: decode_assignment(a.assignment).partitions for a in sync}
    assert shares == {
        "m-1": [TopicPartition("t", 0), TopicPartition("t", 1), U0],
        "m-2": [TopicPartition("t", 2), TopicPartition("t", 3)],
    }


def test_a_member_s_undecodable_subscription_is_a_protocol_error() -> None:
    members = [coordinator_pb2.JoinGroupMember(member_id="m-1", metadata=b"\x00")]
    with pytest.raises(InconsistentGroupProtocolError):
        member_subscriptions(members)

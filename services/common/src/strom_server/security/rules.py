"""What each RPC needs: the ACL checks of every request, and the filters of list answers.

One table for every service, keyed by method name (``Produce``, ``JoinGroup``, ...): a method
has the same request message and the same meaning whichever service serves it (a storage
node's Fetch and the gateway's, the gateway's JoinGroup and the coordinator's). A ``Rule``
names what the caller must be allowed (``check``, raising the resource type's
``*_AUTHORIZATION_FAILED`` error) and, for metadata and list calls, how the answer is cut to
what the caller may describe (``filter``). Methods not in the table need CLUSTER_ACTION on the
cluster: only services and super users reach them. The table in docs/security.md says the
same in words.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from strom.errors import ErrorCode
from strom.security.acl import CLUSTER_NAME, Operation, ResourceType
from strom_server.rpc.produce_request import produce_call_from_bytes

__all__ = ["PUBLIC_METHODS", "Caller", "Rule", "rule_for"]

READ, WRITE, CREATE, DELETE = Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DELETE
ALTER, DESCRIBE = Operation.ALTER, Operation.DESCRIBE
DESCRIBE_CONFIGS, ALTER_CONFIGS = Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS
CLUSTER_ACTION, IDEMPOTENT_WRITE = Operation.CLUSTER_ACTION, Operation.IDEMPOTENT_WRITE
TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP
CLUSTER, TXN = ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID

#: Served to anyone, authenticated or not.
PUBLIC_METHODS = frozenset(
    {
        "/strom.protocol.v1.Security/Authenticate",
        "/grpc.health.v1.Health/Check",
        "/grpc.health.v1.Health/Watch",
        "/grpc.health.v1.Health/List",
        "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
    }
)


class Caller(Protocol):
    """The authenticated caller of one request, as rules see it."""

    def require(self, operation: Operation, resource_type: ResourceType, name: str) -> None:
        """Raise the resource type's authorization error unless allowed (and audit it)."""

    def allowed(self, operation: Operation, resource_type: ResourceType, name: str) -> bool:
        """Whether allowed, without raising or auditing (for filtering)."""

    def allowed_any(self, operation: Operation, resource_type: ResourceType) -> bool:
        """Whether some ACL allows ``operation`` on some resource of the type."""


Check = Callable[[Caller, Any], None]
Filter = Callable[[Caller, Any, Any], Any]


@dataclass(frozen=True, slots=True)
class Rule:
    check: Check | None = None
    filter: Filter | None = None


def _each(caller: Caller, operation: Operation, rtype: ResourceType, names: Iterable[str]) -> None:
    for name in sorted(set(names)):
        caller.require(operation, rtype, name)


def _partition_topics(request: Any, field: str = "partitions") -> list[str]:
    return [p.topic for p in getattr(request, field)]


def _cluster(operation: Operation) -> Check:
    def check(caller: Caller, request: Any) -> None:
        caller.require(operation, CLUSTER, CLUSTER_NAME)

    return check


# -- the data path ---------------------------------------------------------------------------


def _produce(caller: Caller, request: Any) -> None:
    if isinstance(request, bytes):  # a raw method's request (the storage node's Produce)
        call = produce_call_from_bytes(request)
        topics = [topic for topic, _, _ in call.entries]
        transactional_id = call.transactional_id
    else:
        topics = _partition_topics(request)
        transactional_id = request.transactional_id
    if transactional_id:
        caller.require(WRITE, TXN, transactional_id)
    _each(caller, WRITE, TOPIC, topics)


def _replica_or(operation: Operation) -> Check:
    def check(caller: Caller, request: Any) -> None:
        if request.replica_id >= 0:
            caller.require(CLUSTER_ACTION, CLUSTER, CLUSTER_NAME)
        else:
            _each(caller, operation, TOPIC, _partition_topics(request))

    return check


def _topics_in(field: str, operation: Operation) -> Check:
    def check(caller: Caller, request: Any) -> None:
        _each(caller, operation, TOPIC, _partition_topics(request, field))

    return check


def _single_topic(operation: Operation) -> Check:
    def check(caller: Caller, request: Any) -> None:
        caller.require(operation, TOPIC, request.topic)

    return check


# -- metadata and admin ----------------------------------------------------------------------


def _metadata_filter(caller: Caller, request: Any, response: Any) -> Any:
    requested = set(request.topics)
    kept = []
    for topic in response.topics:
        if caller.allowed(DESCRIBE, TOPIC, topic.name):
            kept.append(topic)
        elif topic.name in requested:
            # Named but not describable: the same answer whether it exists or not.
            del topic.partitions[:]
            topic.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            topic.topic_id = ""
            kept.append(topic)
    del response.topics[:]
    response.topics.extend(kept)
    return response


def _create_topics(caller: Caller, request: Any) -> None:
    if caller.allowed(CREATE, CLUSTER, CLUSTER_NAME):
        return
    _each(caller, CREATE, TOPIC, [t.name for t in request.topics])


def _configs(operation: Operation) -> Check:
    def check(caller: Caller, request: Any) -> None:
        for resource in request.resources:
            if resource.type == 2:  # RESOURCE_TOPIC
                caller.require(operation, TOPIC, resource.name)
            else:
                caller.require(operation, CLUSTER, CLUSTER_NAME)

    return check


def _init_producer_id(caller: Caller, request: Any) -> None:
    if request.transactional_id:
        caller.require(WRITE, TXN, request.transactional_id)
    elif not (
        caller.allowed(IDEMPOTENT_WRITE, CLUSTER, CLUSTER_NAME) or caller.allowed_any(WRITE, TOPIC)
    ):
        caller.require(IDEMPOTENT_WRITE, CLUSTER, CLUSTER_NAME)


# -- groups and transactions -----------------------------------------------------------------


def _find_coordinator(caller: Caller, request: Any) -> None:
    rtype = TXN if request.key_type == 1 else GROUP
    caller.require(DESCRIBE, rtype, request.group_id)


def _group(operation: Operation, topics: Operation | None = None) -> Check:
    def check(caller: Caller, request: Any) -> None:
        caller.require(operation, GROUP, request.group_id)
        if topics is not None:
            _each(caller, topics, TOPIC, _partition_topics(request))

    return check


def _groups(operation: Operation) -> Check:
    def check(caller: Caller, request: Any) -> None:
        _each(caller, operation, GROUP, request.group_ids)

    return check


def _list_groups_filter(caller: Caller, request: Any, response: Any) -> Any:
    kept = [g for g in response.groups if caller.allowed(DESCRIBE, GROUP, g.group_id)]
    del response.groups[:]
    response.groups.extend(kept)
    return response


def _txn(extra: Check | None = None) -> Check:
    def check(caller: Caller, request: Any) -> None:
        caller.require(WRITE, TXN, request.transactional_id)
        if extra is not None:
            extra(caller, request)

    return check


def _txn_offset_commit(caller: Caller, request: Any) -> None:
    caller.require(READ, GROUP, request.group_id)
    _each(caller, READ, TOPIC, _partition_topics(request))


def _add_partitions(caller: Caller, request: Any) -> None:
    _each(caller, WRITE, TOPIC, _partition_topics(request))


def _add_offsets(caller: Caller, request: Any) -> None:
    caller.require(READ, GROUP, request.group_id)


def _list_transactions_filter(caller: Caller, request: Any, response: Any) -> Any:
    kept = [t for t in response.transactions if caller.allowed(DESCRIBE, TXN, t.transactional_id)]
    del response.transactions[:]
    response.transactions.extend(kept)
    return response


def _describe_transactions(caller: Caller, request: Any) -> None:
    _each(caller, DESCRIBE, TXN, request.transactional_ids)


def _commit_staged(caller: Caller, request: Any) -> None:
    _each(caller, WRITE, TXN, [m.transactional_id for m in request.members])


def _authenticated(caller: Caller, request: Any) -> None:
    """Any authenticated caller (the answer is filtered instead)."""


_RULES: dict[str, Rule] = {
    # data path
    "Produce": Rule(_produce),
    "ProduceStream": Rule(_produce),
    "Fetch": Rule(_replica_or(READ)),
    "FetchStream": Rule(_replica_or(READ)),
    "ListOffsets": Rule(_replica_or(DESCRIBE)),
    "OffsetForLeaderEpoch": Rule(_replica_or(DESCRIBE)),
    "DeleteRecords": Rule(_topics_in("partitions", DELETE)),
    "ProduceRecords": Rule(_single_topic(WRITE)),
    "FetchRecords": Rule(_single_topic(READ)),
    "DescribeProducers": Rule(_topics_in("partitions", READ)),
    # metadata and admin
    "Metadata": Rule(_authenticated, _metadata_filter),
    "CreateTopics": Rule(_create_topics),
    "DeleteTopics": Rule(lambda c, r: _each(c, DELETE, TOPIC, r.names)),
    "CreatePartitions": Rule(lambda c, r: _each(c, ALTER, TOPIC, [t.name for t in r.topics])),
    "DescribeConfigs": Rule(_configs(DESCRIBE_CONFIGS)),
    "IncrementalAlterConfigs": Rule(_configs(ALTER_CONFIGS)),
    "ElectLeaders": Rule(_cluster(ALTER)),
    "AlterPartitionReassignments": Rule(_cluster(ALTER)),
    "ListPartitionReassignments": Rule(_cluster(DESCRIBE)),
    "DescribeLogDirs": Rule(_cluster(DESCRIBE)),
    "InitProducerId": Rule(_init_producer_id),
    # groups
    "FindCoordinator": Rule(_find_coordinator),
    "JoinGroup": Rule(_group(READ)),
    "SyncGroup": Rule(_group(READ)),
    "Heartbeat": Rule(_group(READ)),
    "LeaveGroup": Rule(_group(READ)),
    "OffsetCommit": Rule(_group(READ, READ)),
    "OffsetFetch": Rule(_group(DESCRIBE, DESCRIBE)),
    "OffsetDelete": Rule(_group(DELETE, READ)),
    "ListGroups": Rule(_authenticated, _list_groups_filter),
    "DescribeGroups": Rule(_groups(DESCRIBE)),
    "DeleteGroups": Rule(_groups(DELETE)),
    # transactions
    "TxnOffsetCommit": Rule(_txn(_txn_offset_commit)),
    "AddPartitionsToTxn": Rule(_txn(_add_partitions)),
    "AddOffsetsToTxn": Rule(_txn(_add_offsets)),
    "EndTxn": Rule(_txn()),
    "ListTransactions": Rule(_authenticated, _list_transactions_filter),
    "DescribeTransactions": Rule(_describe_transactions),
    "CommitStagedTransactions": Rule(_commit_staged),
    "DescribeStagedCommit": Rule(_cluster(DESCRIBE)),
    # users and ACLs
    "AlterUserScramCredentials": Rule(_cluster(ALTER)),
    "DescribeUserScramCredentials": Rule(_cluster(DESCRIBE)),
    "CreateAcls": Rule(_cluster(ALTER)),
    "DeleteAcls": Rule(_cluster(ALTER)),
    "DescribeAcls": Rule(_cluster(DESCRIBE)),
}

#: Internal calls between services (ISR changes, transaction markers): the cluster's own.
_INTERNAL = Rule(_cluster(CLUSTER_ACTION))
_INTERNAL_METHODS = frozenset({"AlterPartition", "WriteTxnMarkers"})


def rule_for(method: str) -> Rule:
    """The rule of ``/package.Service/Method``."""
    name = method.rpartition("/")[2]
    if name in _INTERNAL_METHODS:
        return _INTERNAL
    return _RULES.get(name, _INTERNAL)

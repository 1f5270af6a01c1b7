"""What each RPC needs: the ACL checks of every request, and the filters of list answers.

One table for every service, keyed by method name (``Produce``, ``JoinGroup``, ...): a method
has the same request message and the same meaning whichever service serves it (a storage
node's Fetch and the gateway's, the gateway's JoinGroup and the coordinator's). A ``Rule``
names what the caller must be allowed (``check``, raising the resource type's
``*_AUTHORIZATION_FAILED`` error) and, for metadata and list calls, how the answer is cut to
what the caller may describe (``filter``). A request naming several topics (groups) is
authorized per entry as Kafka answers it (``entries``): the refused entries are taken out of
the request and answered with their ``*_AUTHORIZATION_FAILED`` code beside the others (an
all-or-nothing request, AddPartitionsToTxn, is then not served at all: its other entries answer
OPERATION_NOT_ATTEMPTED); a unary request whose every entry is refused is refused whole, a
stream's request is answered in its place in the stream (entries refused in it, the stream
going on). ``INTERNAL_METHODS`` (calls
between services) need CLUSTER_ACTION on the cluster, as does any method in no table (only
services and super users reach it); a unit test holds every RPC of the proto services to one
of the tables. The table in docs/security.md says the same in words.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from strom.errors import AuthorizationFailedError, ErrorCode, OperationNotAttemptedError
from strom.protocol.v1 import storage_pb2, transaction_pb2
from strom.security.acl import CLUSTER_NAME, Operation, ResourceType
from strom_server.rpc.produce_request import produce_call_from_bytes

__all__ = [
    "INTERNAL_METHODS",
    "PUBLIC_METHODS",
    "Caller",
    "PerEntry",
    "Rule",
    "has_rule",
    "rule_for",
]

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

    def refusal(
        self, operation: Operation, resource_type: ResourceType, name: str
    ) -> AuthorizationFailedError | None:
        """The error to answer (audited) when not allowed, else None."""


Check = Callable[[Caller, Any], None]
Filter = Callable[[Caller, Any, Any], Any]


@dataclass(frozen=True, slots=True)
class PerEntry:
    """Entries of a request authorized one by one: ``entries`` is the request's repeated field
    (messages, or names), ``results`` the response's; a refused entry is answered by a result
    with the ``keys`` copied from it (for a name: the result's ``keys[0]`` set to it) and the
    error's code. Each entry names a resource of type ``rtype`` (its ``keys[0]``), or the one
    ``resource`` gives (a config resource: a topic, or the cluster for a broker). ``skip``
    says when the entries need no check of their own (the rule's ``head`` decided: a
    replica's fetch, a caller allowed CREATE on the cluster). With ``untried`` the request is
    all or nothing (AddPartitionsToTxn): when some entries are refused, none is served and the
    others are answered with that error too (``split`` returns no request). A serialized
    request (a Produce's bytes) is read as ``request_type``; a serialized answer, or one made
    without the handler (``untried``), is a ``response_type`` (protobuf merges repeated
    fields)."""

    entries: str
    results: str
    operation: Operation
    rtype: ResourceType
    keys: tuple[str, ...] = ("topic", "partition")
    skip: Callable[[Caller, Any], bool] | None = None
    request_type: Any = None
    response_type: Any = None
    resource: Callable[[Any], tuple[ResourceType, str]] | None = None
    untried: Callable[[str], Exception] | None = None

    def _resource(self, entry: Any) -> tuple[ResourceType, str]:
        if self.resource is not None:
            return self.resource(entry)
        name = entry if isinstance(entry, str) else str(getattr(entry, self.keys[0]))
        return self.rtype, name

    def split(
        self, caller: Caller, request: Any, read: Any, *, refuse_whole: bool = True
    ) -> tuple[Any, list[tuple[Any, Exception]]]:
        """``request`` (``read`` as ``readable`` gives it) without its refused entries, and
        those with their errors; when every entry is refused, raises the first refusal
        (``refuse_whole``) or leaves none. With ``untried`` and some entry refused: None, and
        every entry with its error (the refused ones first)."""
        if self.skip is not None and self.skip(caller, read):
            return request, []
        decided: dict[tuple[ResourceType, str], AuthorizationFailedError | None] = {}
        kept: list[int] = []
        refused: list[tuple[Any, Exception]] = []
        for index, entry in enumerate(getattr(read, self.entries)):
            resource = self._resource(entry)
            if resource not in decided:
                decided[resource] = caller.refusal(self.operation, *resource)
            error = decided[resource]
            if error is None:
                kept.append(index)
            else:
                refused.append((entry, error))
        if not refused:
            return request, []
        if not kept and refuse_whole:
            raise refused[0][1]
        if self.untried is not None:
            entries = getattr(read, self.entries)
            because = ", ".join(sorted({self._resource(e)[1] for e, _ in refused}))
            untried = self.untried(f"not attempted: the request was refused for {because}")
            return None, refused + [(entries[i], untried) for i in kept]
        raw = isinstance(request, bytes)
        narrowed = self.request_type.FromString(request) if raw else type(request)()
        if not raw:
            narrowed.CopyFrom(request)
        field = getattr(narrowed, self.entries)
        chosen = [field[i] for i in kept]
        del field[:]
        if chosen and isinstance(chosen[0], str):
            field.extend(chosen)
        else:
            for entry in chosen:
                field.add().CopyFrom(entry)
        return (narrowed.SerializeToString() if raw else narrowed), refused

    def answer(self, response: Any, refused: list[tuple[Any, Exception]]) -> Any:
        """``response`` (None: an empty ``response_type``) with a result per refused entry."""
        if response is None:
            response = self.response_type()
        raw = isinstance(response, bytes)
        holder = self.response_type() if raw else response
        results = getattr(holder, self.results)
        fields = holder.DESCRIPTOR.fields_by_name[self.results].message_type.fields_by_name
        has_message = "error_message" in fields
        for entry, error in refused:
            result = results.add()
            if isinstance(entry, str):
                setattr(result, self.keys[0], entry)
            else:
                for key in self.keys:
                    setattr(result, key, getattr(entry, key))
            result.error_code = int(getattr(error, "code", ErrorCode.UNKNOWN_SERVER_ERROR))
            if has_message:
                result.error_message = str(error)
        return response + holder.SerializeToString() if raw else response


@dataclass(frozen=True, slots=True)
class _Key:
    """A serialized Produce's entry, as ``PerEntry`` reads it."""

    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class _ReadProduce:
    """A serialized Produce as rules read it: its fields, the records not parsed."""

    transactional_id: str
    partitions: list[_Key]


def readable(request: Any) -> Any:
    """What rules read of ``request``: a serialized Produce's fields (read once, its records
    left in place), else the request itself."""
    if isinstance(request, bytes):
        call = produce_call_from_bytes(request)
        return _ReadProduce(call.transactional_id, [_Key(t, p) for t, p, _ in call.entries])
    return request


@dataclass(frozen=True, slots=True)
class Rule:
    """``check`` authorizes a whole request; with ``entries`` (and no ``check``), a request is
    checked by ``head`` (its part outside the entries, may be None) and then entry by entry
    (``split``)."""

    check: Check | None = None
    filter: Filter | None = None
    entries: PerEntry | None = None
    head: Check | None = None

    def split(
        self, caller: Caller, request: Any, *, refuse_whole: bool = True
    ) -> tuple[Any, list[tuple[Any, Exception]]]:
        """``head``, then ``entries.split`` (a rule with ``entries``)."""
        assert self.entries is not None
        read = readable(request)
        if self.head is not None:
            self.head(caller, read)
        return self.entries.split(caller, request, read, refuse_whole=refuse_whole)

    def require(self, caller: Caller, request: Any) -> None:
        """The whole request authorized (a stream whose handler cannot answer per entry):
        ``check``, or the head and every entry."""
        if self.entries is None:
            if self.check is not None:
                self.check(caller, request)
            return
        _, refused = self.split(caller, request)
        if refused:
            raise refused[0][1]


def _each(caller: Caller, operation: Operation, rtype: ResourceType, names: Iterable[str]) -> None:
    for name in sorted(set(names)):
        caller.require(operation, rtype, name)


def _cluster(operation: Operation) -> Check:
    def check(caller: Caller, request: Any) -> None:
        caller.require(operation, CLUSTER, CLUSTER_NAME)

    return check


# -- the data path ---------------------------------------------------------------------------


def _produce_head(caller: Caller, request: Any) -> None:
    if request.transactional_id:
        caller.require(WRITE, TXN, request.transactional_id)


def _replica_head(caller: Caller, request: Any) -> None:
    if request.replica_id >= 0:
        caller.require(CLUSTER_ACTION, CLUSTER, CLUSTER_NAME)


def _is_replica(caller: Caller, request: Any) -> bool:
    return bool(request.replica_id >= 0)


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


def _config_resource(resource: Any) -> tuple[ResourceType, str]:
    """What a config resource needs an ACL on: its topic, or the cluster (a broker's)."""
    if resource.type == 2:  # RESOURCE_TOPIC
        return TOPIC, resource.name
    return CLUSTER, CLUSTER_NAME


def _configs(operation: Operation) -> PerEntry:
    return PerEntry(
        "resources", "results", operation, TOPIC, ("type", "name"), resource=_config_resource
    )


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


def _group(operation: Operation) -> Check:
    def check(caller: Caller, request: Any) -> None:
        caller.require(operation, GROUP, request.group_id)

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


def _add_offsets(caller: Caller, request: Any) -> None:
    caller.require(READ, GROUP, request.group_id)


def _list_transactions_filter(caller: Caller, request: Any, response: Any) -> Any:
    kept = [t for t in response.transactions if caller.allowed(DESCRIBE, TXN, t.transactional_id)]
    del response.transactions[:]
    response.transactions.extend(kept)
    return response


def _commit_staged(caller: Caller, request: Any) -> None:
    _each(caller, WRITE, TXN, [m.transactional_id for m in request.members])


def _authenticated(caller: Caller, request: Any) -> None:
    """Any authenticated caller (the answer is filtered instead)."""


def _partitions(operation: Operation, results: str = "partitions", **kw: Any) -> PerEntry:
    return PerEntry("partitions", results, operation, TOPIC, **kw)


def _may_create_any(caller: Caller, request: Any) -> bool:
    return caller.allowed(CREATE, CLUSTER, CLUSTER_NAME)


def _offset_fetch_filter(caller: Caller, request: Any, response: Any) -> Any:
    """An OffsetFetch of every partition (none named) answers only describable topics."""
    if request.partitions:
        return response
    kept = [p for p in response.partitions if caller.allowed(DESCRIBE, TOPIC, p.topic)]
    del response.partitions[:]
    response.partitions.extend(kept)
    return response


_PRODUCE = Rule(
    entries=_partitions(
        WRITE,
        request_type=storage_pb2.ProduceRequest,
        response_type=storage_pb2.ProduceResponse,
    ),
    head=_produce_head,
)


def _replica_or_each(operation: Operation, response_type: Any = None) -> Rule:
    entries = _partitions(operation, skip=_is_replica, response_type=response_type)
    return Rule(entries=entries, head=_replica_head)


_FETCH = _replica_or_each(READ, storage_pb2.FetchResponse)


_RULES: dict[str, Rule] = {
    # data path
    "Produce": _PRODUCE,
    "ProduceStream": _PRODUCE,
    "Fetch": _FETCH,
    "FetchStream": _FETCH,
    "ListOffsets": _replica_or_each(DESCRIBE),
    "OffsetForLeaderEpoch": _replica_or_each(DESCRIBE),
    "DeleteRecords": Rule(entries=_partitions(DELETE)),
    "ProduceRecords": Rule(_single_topic(WRITE)),
    "FetchRecords": Rule(_single_topic(READ)),
    "DescribeProducers": Rule(entries=_partitions(READ)),
    # metadata and admin
    "Metadata": Rule(_authenticated, _metadata_filter),
    "CreateTopics": Rule(
        entries=PerEntry("topics", "topics", CREATE, TOPIC, ("name",), skip=_may_create_any)
    ),
    "DeleteTopics": Rule(entries=PerEntry("names", "topics", DELETE, TOPIC, ("name",))),
    "CreatePartitions": Rule(entries=PerEntry("topics", "topics", ALTER, TOPIC, ("name",))),
    "DescribeConfigs": Rule(entries=_configs(DESCRIBE_CONFIGS)),
    "IncrementalAlterConfigs": Rule(entries=_configs(ALTER_CONFIGS)),
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
    "OffsetCommit": Rule(entries=_partitions(READ), head=_group(READ)),
    "OffsetFetch": Rule(
        filter=_offset_fetch_filter, entries=_partitions(DESCRIBE), head=_group(DESCRIBE)
    ),
    "OffsetDelete": Rule(entries=_partitions(READ), head=_group(DELETE)),
    "ListGroups": Rule(_authenticated, _list_groups_filter),
    "DescribeGroups": Rule(entries=PerEntry("group_ids", "groups", DESCRIBE, GROUP, ("group_id",))),
    "DeleteGroups": Rule(entries=PerEntry("group_ids", "results", DELETE, GROUP, ("group_id",))),
    # transactions
    "TxnOffsetCommit": Rule(entries=_partitions(READ), head=_txn(_add_offsets)),
    "AddPartitionsToTxn": Rule(
        entries=_partitions(
            WRITE,
            "results",
            response_type=transaction_pb2.AddPartitionsToTxnResponse,
            untried=OperationNotAttemptedError,
        ),
        head=_txn(),
    ),
    "AddOffsetsToTxn": Rule(_txn(_add_offsets)),
    "EndTxn": Rule(_txn()),
    "ListTransactions": Rule(_authenticated, _list_transactions_filter),
    "DescribeTransactions": Rule(
        entries=PerEntry("transactional_ids", "transactions", DESCRIBE, TXN, ("transactional_id",))
    ),
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
INTERNAL_METHODS = frozenset({"AlterPartition", "WriteTxnMarkers"})


def has_rule(name: str) -> bool:
    """Whether the method ``name`` (``Produce``) has a rule of its own or is an internal one."""
    return name in _RULES or name in INTERNAL_METHODS


def rule_for(method: str) -> Rule:
    """The rule of ``/package.Service/Method``."""
    name = method.rpartition("/")[2]
    if name in INTERNAL_METHODS:
        return _INTERNAL
    return _RULES.get(name, _INTERNAL)

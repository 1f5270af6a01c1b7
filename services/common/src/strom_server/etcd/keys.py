"""The etcd key layout of a Strom cluster: the contract between controllers, storage nodes,
the coordinator and the gateway. Every key lives under a prefix (default ``/strom``) so that
several clusters can share one etcd. Values are JSON objects, UTF-8.

=================================  ====================================================  =======
key                                value                                                 writer
=================================  ====================================================  =======
P/cluster/id                       {"cluster_id": uuid}                                  ctrl
P/controller/leader                {"id", "host", "port", "epoch"} on the active         ctrl
                                   controller's lease (created only if absent)
P/controller/epoch                 {"epoch": n}, bumped with each election               ctrl
P/controller/members/<id>          {"id", "host", "port"} on each running controller's   ctrl
                                   own lease, standbys too (listed by the gateway)
P/brokers/ids/<id>                 {"id", "host", "port", "rack"} on the node's lease;   node
                                   broker epoch = the key's create revision
P/topics/<name>                    {"topic_id", "partitions": {"0": [replicas]},         ctrl
                                   "configs": {topic overrides}}
P/partitions/<topic>/<partition>   {"leader", "leader_epoch", "isr", "partition_epoch"}  ctrl
P/config/brokers                   {topic-config name: value}: cluster-wide defaults     ctrl
P/reassignments/<topic>/<p>        {"target", "adding", "removing",                      ctrl
                                   "throttle_bytes_per_sec"}
P/producer_ids/next_block          {"next": n}                                           ctrl
P/transactional_ids/<quoted id>    {"producer_id", "producer_epoch"}: the one producer   ctrl
                                   id of a transactional id and its current epoch
P/coordinators/ids/<id>            {"id", "host", "port"} on the coordinator's lease     coord
P/coordinators/owners/<p>          {"coordinator_id", "epoch"} on the owner's lease:      coord
                                   who serves partition p of __consumer_offsets
P/coordinators/txn_owners/<p>      the same for partition p of __transaction_state       coord
P/registry/leader                  {"id", "url"} on the schema registry writer's         reg
                                   lease (created only if absent)
P/registry/next_id                 {"next": n}: the next schema id to give, bumped by    reg
                                   the writer in a transaction guarded by the leader key
P/security/token-secret            {"secret": base64}: signs login tokens (created by    any
                                   the first service needing it, only if absent)
P/security/users/<quoted name>     {"credentials": [SCRAM credential per mechanism]}     gw
P/security/acls/<digest>           one ACL binding (docs/security.md)                     gw
=================================  ====================================================  =======

Every controller write is a transaction guarded by the value of ``P/controller/leader``, so a
deposed controller cannot write (docs/controller.md).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

__all__ = ["ClusterKeys", "decode_value", "encode_value"]


def encode_value(value: dict[str, Any]) -> bytes:
    return json.dumps(value, separators=(",", ":"), sort_keys=True).encode()


def decode_value(raw: bytes | str) -> dict[str, Any]:
    value = json.loads(raw)
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got {type(value).__name__}")
    return value


def _topic_partition(key: str, prefix: str) -> tuple[str, int] | None:
    rest = key.removeprefix(prefix)
    if rest == key:
        return None
    topic, _, index = rest.rpartition("/")
    return (topic, int(index)) if topic and index.isdigit() else None


@dataclass(frozen=True)
class ClusterKeys:
    """Key names under one prefix."""

    prefix: str = "/strom"

    def _key(self, *parts: object) -> str:
        return "/".join((self.prefix.rstrip("/"), *map(str, parts)))

    @property
    def cluster_id(self) -> str:
        return self._key("cluster", "id")

    @property
    def controller_leader(self) -> str:
        return self._key("controller", "leader")

    @property
    def controller_epoch(self) -> str:
        return self._key("controller", "epoch")

    @property
    def controller_root(self) -> str:
        """Prefix of the leader key, the epoch and the members (ends with a slash)."""
        return self._key("controller", "")

    @property
    def controller_members(self) -> str:
        """Prefix of every running controller's registration (ends with a slash)."""
        return self._key("controller", "members", "")

    def controller_member(self, controller_id: int) -> str:
        return self._key("controller", "members", controller_id)

    def parse_controller_member_key(self, key: str) -> int | None:
        rest = key.removeprefix(self.controller_members)
        return int(rest) if rest != key and rest.isdigit() else None

    @property
    def brokers(self) -> str:
        """Prefix of every broker registration (ends with a slash)."""
        return self._key("brokers", "ids", "")

    def broker(self, node_id: int) -> str:
        return self._key("brokers", "ids", node_id)

    @property
    def topics(self) -> str:
        return self._key("topics", "")

    def topic(self, name: str) -> str:
        return self._key("topics", name)

    @property
    def partitions(self) -> str:
        return self._key("partitions", "")

    def partitions_of(self, topic: str) -> str:
        return self._key("partitions", topic, "")

    def partition(self, topic: str, partition: int) -> str:
        return self._key("partitions", topic, partition)

    @property
    def broker_config(self) -> str:
        return self._key("config", "brokers")

    @property
    def reassignments(self) -> str:
        return self._key("reassignments", "")

    def reassignment(self, topic: str, partition: int) -> str:
        return self._key("reassignments", topic, partition)

    @property
    def producer_id_block(self) -> str:
        return self._key("producer_ids", "next_block")

    @property
    def transactional_ids(self) -> str:
        """Prefix of every transactional id's producer id record (ends with a slash)."""
        return self._key("transactional_ids", "")

    def transactional_id(self, transactional_id: str) -> str:
        """The key of ``transactional_id`` (percent-quoted: one path segment, any id)."""
        return self._key("transactional_ids", quote(transactional_id, safe=""))

    def parse_transactional_id_key(self, key: str) -> str | None:
        rest = key.removeprefix(self.transactional_ids)
        return unquote(rest) if rest != key and rest and "/" not in rest else None

    @property
    def coordinators(self) -> str:
        """Prefix of every coordinator registration (ends with a slash)."""
        return self._key("coordinators", "ids", "")

    def coordinator(self, coordinator_id: int) -> str:
        return self._key("coordinators", "ids", coordinator_id)

    @property
    def coordinator_owners(self) -> str:
        """Prefix of the ownership keys of ``__consumer_offsets`` partitions."""
        return self._key("coordinators", "owners", "")

    def coordinator_owner(self, partition: int) -> str:
        return self._key("coordinators", "owners", partition)

    @property
    def transaction_owners(self) -> str:
        """Prefix of the ownership keys of ``__transaction_state`` partitions."""
        return self._key("coordinators", "txn_owners", "")

    def transaction_owner(self, partition: int) -> str:
        return self._key("coordinators", "txn_owners", partition)

    @property
    def registry_leader(self) -> str:
        """The schema registry's elected writer (on its lease)."""
        return self._key("registry", "leader")

    @property
    def registry_next_id(self) -> str:
        """The schema registry's next schema id."""
        return self._key("registry", "next_id")

    @property
    def token_secret(self) -> str:
        """The cluster secret signing login tokens (docs/security.md)."""
        return self._key("security", "token-secret")

    @property
    def users(self) -> str:
        """Prefix of the SCRAM users (ends with a slash)."""
        return self._key("security", "users", "")

    def user(self, name: str) -> str:
        """The key of user ``name`` (percent-quoted: one path segment, any name)."""
        return self._key("security", "users", quote(name, safe=""))

    def parse_user_key(self, key: str) -> str | None:
        rest = key.removeprefix(self.users)
        return unquote(rest) if rest != key and rest and "/" not in rest else None

    @property
    def acls(self) -> str:
        """Prefix of the ACLs (ends with a slash)."""
        return self._key("security", "acls", "")

    def acl(self, acl_id: str) -> str:
        """The key of one ACL (its id: a digest of the binding, so creating it is idempotent)."""
        return self._key("security", "acls", acl_id)

    def parse_coordinator_key(self, key: str) -> int | None:
        rest = key.removeprefix(self.coordinators)
        return int(rest) if rest != key and rest.isdigit() else None

    def parse_coordinator_owner_key(self, key: str) -> int | None:
        rest = key.removeprefix(self.coordinator_owners)
        return int(rest) if rest != key and rest.isdigit() else None

    def parse_transaction_owner_key(self, key: str) -> int | None:
        rest = key.removeprefix(self.transaction_owners)
        return int(rest) if rest != key and rest.isdigit() else None

    def parse_partition_key(self, key: str) -> tuple[str, int] | None:
        """(topic, partition) of a ``P/partitions/<topic>/<p>`` key, else None."""
        return _topic_partition(key, self.partitions)

    def parse_topic_key(self, key: str) -> str | None:
        name = key.removeprefix(self.topics)
        return name if name != key and name and "/" not in name else None

    def parse_reassignment_key(self, key: str) -> tuple[str, int] | None:
        """(topic, partition) of a ``P/reassignments/<topic>/<p>`` key, else None."""
        return _topic_partition(key, self.reassignments)

    def parse_broker_key(self, key: str) -> int | None:
        rest = key.removeprefix(self.brokers)
        return int(rest) if rest != key and rest.isdigit() else None

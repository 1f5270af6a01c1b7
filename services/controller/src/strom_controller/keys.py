"""The etcd key layout of a Strom cluster: the one place that spells keys and their JSON values.

This is a contract shared with the storage nodes and the gateway (docs/controller.md); the key
names come from ``strom_server.etcd.keys``, which every service uses. ``P`` is
the configured prefix (default ``/strom``); every value is UTF-8 JSON.

==============================================  ==============================================
key                                             value (writer)
==============================================  ==============================================
``P/cluster/id``                                ``{"cluster_id": uuid4}`` (first controller,
                                                create-if-absent)
``P/controller/leader``                         ``{"id", "host", "port", "epoch"}`` on the
                                                active controller's lease (create-if-absent)
``P/controller/epoch``                          ``{"epoch": N}``, bumped with the leader key
``P/brokers/ids/<id>``                          ``{"id", "host", "port", "rack"}`` on the
                                                storage node's lease; broker epoch =
                                                create_revision
``P/topics/<name>``                             ``{"topic_id", "partitions": {"0": [ids]},
                                                "configs": {name: value}}`` (controller)
``P/partitions/<topic>/<partition>``            ``{"leader", "leader_epoch", "isr",
                                                "partition_epoch"}`` (controller)
``P/config/brokers``                            ``{topic config name: value}`` (controller)
``P/reassignments/<topic>/<partition>``         ``{"target", "adding", "removing",
                                                "throttle_bytes_per_sec"}`` (controller)
``P/producer_ids/next_block``                   ``{"next": N}`` (controller)
``P/transactional_ids/<quoted id>``             ``{"producer_id", "producer_epoch"}``
                                                (controller)
==============================================  ==============================================

Every controller write is one transaction whose compare includes
``value(P/controller/leader) == <the bytes the writer put there>``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from strom_server.etcd.keys import ClusterKeys, decode_value, encode_value

__all__ = [
    "BrokerRecord",
    "ControllerRecord",
    "KeyLayout",
    "PartitionRecord",
    "ReassignmentRecord",
    "TopicRecord",
    "decode",
    "encode",
]


def encode(value: dict[str, Any]) -> bytes:
    """Compact, key-sorted UTF-8 JSON (stable bytes: the leader key is compared byte for byte)."""
    return encode_value(value)


def decode(raw: bytes) -> dict[str, Any]:
    return decode_value(raw)


class KeyLayout:
    """Key names under one cluster prefix, spelled by ``strom_server.etcd.keys.ClusterKeys``
    (the layout every service shares), plus the prefixes and parsing the controller needs."""

    def __init__(self, prefix: str = "/strom") -> None:
        shared = ClusterKeys(prefix.rstrip("/"))
        self.shared = shared
        self.prefix = shared.prefix
        self.root = f"{self.prefix}/"
        self.cluster_id = shared.cluster_id
        self.controller_leader = shared.controller_leader
        self.controller_epoch = shared.controller_epoch
        self.brokers = shared.brokers
        self.topics = shared.topics
        self.partitions = shared.partitions
        self.broker_config = shared.broker_config
        self.reassignments = shared.reassignments
        self.producer_ids = shared.producer_id_block
        self.transactional_ids = shared.transactional_ids

    def broker(self, broker_id: int) -> str:
        return self.shared.broker(broker_id)

    def topic(self, name: str) -> str:
        return self.shared.topic(name)

    def transactional_id(self, transactional_id: str) -> str:
        return self.shared.transactional_id(transactional_id)

    def partition(self, topic: str, partition: int) -> str:
        return self.shared.partition(topic, partition)

    def topic_partitions(self, topic: str) -> str:
        """Prefix of every partition-state key of ``topic``."""
        return self.shared.partitions_of(topic)

    def reassignment(self, topic: str, partition: int) -> str:
        return self.shared.reassignment(topic, partition)

    def topic_reassignments(self, topic: str) -> str:
        return f"{self.reassignments}{topic}/"

    @staticmethod
    def split_topic_partition(rest: str) -> tuple[str, int] | None:
        """``"orders/3"`` -> ("orders", 3); None when malformed."""
        topic, sep, index = rest.rpartition("/")
        if not sep or not topic or not index.isdigit():
            return None
        return topic, int(index)


@dataclass(frozen=True)
class ControllerRecord:
    """Value of ``P/controller/leader``."""

    id: int
    host: str
    port: int
    epoch: int

    def to_json(self) -> bytes:
        return encode({"id": self.id, "host": self.host, "port": self.port, "epoch": self.epoch})

    @classmethod
    def from_json(cls, raw: bytes) -> ControllerRecord:
        v = decode(raw)
        return cls(int(v["id"]), str(v["host"]), int(v["port"]), int(v["epoch"]))

    def describe(self) -> str:
        return f"{self.id} at {self.host}:{self.port}"


@dataclass(frozen=True)
class BrokerRecord:
    """Value of ``P/brokers/ids/<id>``; ``epoch`` is the key's create_revision (not stored)."""

    id: int
    host: str
    port: int
    rack: str = ""
    epoch: int = 0

    def to_json(self) -> bytes:
        return encode({"id": self.id, "host": self.host, "port": self.port, "rack": self.rack})

    @classmethod
    def from_json(cls, raw: bytes, epoch: int = 0) -> BrokerRecord:
        v = decode(raw)
        return cls(int(v["id"]), str(v["host"]), int(v["port"]), str(v.get("rack") or ""), epoch)


@dataclass(frozen=True)
class TopicRecord:
    """Value of ``P/topics/<name>``: replica assignment (preferred leader first) and overrides."""

    topic_id: str
    partitions: dict[int, tuple[int, ...]]
    configs: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> bytes:
        return encode(
            {
                "topic_id": self.topic_id,
                "partitions": {str(p): list(r) for p, r in sorted(self.partitions.items())},
                "configs": dict(self.configs),
            }
        )

    @classmethod
    def from_json(cls, raw: bytes) -> TopicRecord:
        v = decode(raw)
        parts = {int(p): tuple(int(b) for b in r) for p, r in v.get("partitions", {}).items()}
        configs = {str(k): str(val) for k, val in (v.get("configs") or {}).items()}
        return cls(str(v["topic_id"]), parts, configs)


@dataclass(frozen=True)
class PartitionRecord:
    """Value of ``P/partitions/<topic>/<partition>``."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int

    def to_json(self) -> bytes:
        return encode(
            {
                "leader": self.leader,
                "leader_epoch": self.leader_epoch,
                "isr": list(self.isr),
                "partition_epoch": self.partition_epoch,
            }
        )

    @classmethod
    def from_json(cls, raw: bytes) -> PartitionRecord:
        v = decode(raw)
        return cls(
            int(v["leader"]),
            int(v["leader_epoch"]),
            tuple(int(b) for b in v["isr"]),
            int(v["partition_epoch"]),
        )


@dataclass(frozen=True)
class ReassignmentRecord:
    """Value of ``P/reassignments/<topic>/<partition>`` while a reassignment runs."""

    target: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]
    throttle_bytes_per_sec: int = 0

    def to_json(self) -> bytes:
        return encode(
            {
                "target": list(self.target),
                "adding": list(self.adding),
                "removing": list(self.removing),
                "throttle_bytes_per_sec": self.throttle_bytes_per_sec,
            }
        )

    @classmethod
    def from_json(cls, raw: bytes) -> ReassignmentRecord:
        v = decode(raw)
        return cls(
            tuple(int(b) for b in v["target"]),
            tuple(int(b) for b in v.get("adding", ())),
            tuple(int(b) for b in v.get("removing", ())),
            int(v.get("throttle_bytes_per_sec", 0)),
        )

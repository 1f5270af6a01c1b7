"""Keeps an ``Authorizer`` equal to the ACLs in etcd: reads them, then follows the prefix with
a watch, so a change reaches every service within a watch round trip (well under a second)."""

from __future__ import annotations

from strom.security.acl import AclBinding
from strom_server.etcd.keys import ClusterKeys
from strom_server.etcd.prefix_follower import PrefixFollower
from strom_server.etcd.store import EtcdStore, KeyValue, WatchBatch
from strom_server.runtime.logs import get_logger
from strom_server.security.authorizer import Authorizer
from strom_server.security.store import decode_acl

__all__ = ["AclWatch"]

log = get_logger(__name__)


class AclWatch:
    """Mirrors ``P/security/acls/`` into ``authorizer`` (start, then close)."""

    def __init__(self, etcd: EtcdStore, keys: ClusterKeys, authorizer: Authorizer) -> None:
        self._authorizer = authorizer
        self._by_key: dict[str, AclBinding] = {}
        self._follower = PrefixFollower(
            etcd, keys.acls, on_snapshot=self._snapshot, on_batch=self._batch
        )

    async def start(self) -> None:
        await self._follower.start()

    async def close(self) -> None:
        await self._follower.close()

    def _snapshot(self, kvs: list[KeyValue], revision: int) -> None:
        self._by_key = {}
        for kv in kvs:
            acl = _decoded(kv.value)
            if acl is not None:
                self._by_key[kv.key] = acl
        self._authorizer.replace(self._by_key.values())
        log.info("acls loaded", count=len(self._by_key), revision=revision)

    def _batch(self, batch: WatchBatch) -> None:
        added: list[AclBinding] = []
        removed: list[AclBinding] = []
        for event in batch.events:
            old = self._by_key.pop(event.kv.key, None)
            if old is not None:
                removed.append(old)
            if event.kind == "put":
                acl = _decoded(event.kv.value)
                if acl is not None:
                    self._by_key[event.kv.key] = acl
                    added.append(acl)
        self._authorizer.apply(added=added, removed=removed)
        log.info("acls changed", added=len(added), removed=len(removed), total=len(self._by_key))


def _decoded(raw: bytes) -> AclBinding | None:
    try:
        return decode_acl(raw)
    except (ValueError, KeyError) as exc:
        log.error("ignoring a malformed acl", error=str(exc))
        return None

"""Security state in etcd: the cluster secret, SCRAM users and ACLs (key layout: ClusterKeys).

Users and ACLs are written by the gateway's Security service; every service reads them. An
ACL's key is a digest of its binding, so creating one twice stores it once.
"""

from __future__ import annotations

import base64
import hashlib
import json

from strom.security.acl import AclBinding, AclFilter
from strom.security.scram import ScramCredential
from strom_server.etcd.keys import ClusterKeys, decode_value, encode_value
from strom_server.etcd.store import Compare, EtcdStore, Put
from strom_server.security.tokens import new_secret

__all__ = ["SecurityStore", "acl_id", "decode_acl"]


def acl_id(acl: AclBinding) -> str:
    """The ACL's key name: a digest of its canonical JSON."""
    canonical = json.dumps(acl.to_dict(), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


def decode_acl(raw: bytes) -> AclBinding:
    return AclBinding.from_dict(decode_value(raw))


class SecurityStore:
    """Reads and writes the security keys through one ``EtcdStore``."""

    def __init__(self, etcd: EtcdStore, keys: ClusterKeys) -> None:
        self.etcd = etcd
        self.keys = keys

    async def token_secret(self) -> bytes:
        """The cluster secret, created (only if absent) by the first caller."""
        key = self.keys.token_secret
        fresh = encode_value({"secret": base64.b64encode(new_secret()).decode()})
        await self.etcd.txn([Compare.absent(key)], [Put(key, fresh)])
        found = await self.etcd.get(key)
        if found is None:
            raise RuntimeError("the token secret vanished from etcd")
        return base64.b64decode(decode_value(found.value)["secret"])

    # -- users -----------------------------------------------------------------------------

    async def credentials(self, user: str) -> list[ScramCredential]:
        found = await self.etcd.get(self.keys.user(user))
        if found is None:
            return []
        return [ScramCredential.from_dict(c) for c in decode_value(found.value)["credentials"]]

    async def users(self) -> dict[str, list[ScramCredential]]:
        kvs, _ = await self.etcd.get_prefix(self.keys.users)
        found: dict[str, list[ScramCredential]] = {}
        for kv in kvs:
            name = self.keys.parse_user_key(kv.key)
            if name is not None:
                found[name] = [
                    ScramCredential.from_dict(c) for c in decode_value(kv.value)["credentials"]
                ]
        return found

    async def put_credential(self, user: str, credential: ScramCredential) -> None:
        """Add or replace the user's credential for its mechanism."""
        others = [c for c in await self.credentials(user) if c.mechanism != credential.mechanism]
        value = {"credentials": [c.to_dict() for c in [*others, credential]]}
        await self.etcd.put(self.keys.user(user), encode_value(value))

    async def delete_credential(self, user: str, mechanism: str = "") -> bool:
        """Remove one mechanism (or, empty, the whole user); False when there was nothing."""
        current = await self.credentials(user)
        if not current:
            return False
        kept = [c for c in current if mechanism and c.mechanism != mechanism.upper()]
        if len(kept) == len(current):
            return False
        if kept:
            value = {"credentials": [c.to_dict() for c in kept]}
            await self.etcd.put(self.keys.user(user), encode_value(value))
        else:
            await self.etcd.delete(self.keys.user(user))
        return True

    # -- ACLs ------------------------------------------------------------------------------

    async def acls(self) -> list[AclBinding]:
        kvs, _ = await self.etcd.get_prefix(self.keys.acls)
        return [decode_acl(kv.value) for kv in kvs]

    async def create_acl(self, acl: AclBinding) -> None:
        await self.etcd.put(self.keys.acl(acl_id(acl)), encode_value(acl.to_dict()))

    async def delete_acls(self, acl_filter: AclFilter) -> list[AclBinding]:
        """Delete every ACL the filter matches; returns them."""
        deleted = []
        for acl in await self.acls():
            if acl_filter.matches(acl):
                await self.etcd.delete(self.keys.acl(acl_id(acl)))
                deleted.append(acl)
        return deleted

"""Kafka's ACL authorizer as plain Python: may this principal do this to that resource?

``Authorizer.authorize(principal, host, operation, resource_type, name)`` decides, in order:
a super user (``super.users``, and the services' own principal) may do anything; a matching
DENY ACL refuses (deny wins); a matching ALLOW ACL, for the operation or one implying it,
allows; a resource that no ACL names at all is allowed only with
``allow.everyone.if.no.acl.found``; anything else is refused.

An ACL matches a resource when its pattern is LITERAL with the same name, LITERAL ``*``, or
PREFIXED with a prefix of the name; it matches a caller when its principal is the caller's
or ``User:*`` and its host the caller's or ``*``.

Speed: ACLs are indexed per resource type (literal names in a dict, prefixes by length), and
decisions are cached until the ACLs change (``replace``/``apply`` bump a version); a cached
check is one dict lookup. Not thread-safe: one event loop owns it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from strom.security.acl import (
    WILDCARD,
    AclBinding,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    implied_by,
)

__all__ = ["SERVICE_PRINCIPAL", "Authorizer"]

#: The principal services use to call each other: always a super user.
SERVICE_PRINCIPAL = "Service:strom"

_CACHE_LIMIT = 100_000
_Key = tuple[str, str, str, str, str]


@dataclass
class _TypeIndex:
    """The ACLs of one resource type."""

    literal: dict[str, list[AclBinding]] = field(default_factory=dict)
    prefixed: dict[str, list[AclBinding]] = field(default_factory=dict)
    prefix_lengths: list[int] = field(default_factory=list)

    def add(self, acl: AclBinding) -> None:
        """Index ``acl`` (``finish`` once every ACL is added)."""
        if acl.pattern_type is PatternType.LITERAL:
            self.literal.setdefault(acl.resource_name, []).append(acl)
        else:
            self.prefixed.setdefault(acl.resource_name, []).append(acl)

    def finish(self) -> None:
        self.prefix_lengths = sorted({len(p) for p in self.prefixed})

    def matching(self, name: str) -> list[AclBinding]:
        found: list[AclBinding] = []
        exact = self.literal.get(name)
        if exact:
            found.extend(exact)
        if name != WILDCARD:
            every = self.literal.get(WILDCARD)
            if every:
                found.extend(every)
        prefixed = self.prefixed
        if prefixed:
            for length in self.prefix_lengths:
                if length > len(name):
                    break
                hits = prefixed.get(name[:length])
                if hits:
                    found.extend(hits)
        return found


class Authorizer:
    """ACL decisions (see the module docstring)."""

    def __init__(
        self,
        acls: Iterable[AclBinding] = (),
        *,
        super_users: Iterable[str] = (),
        allow_everyone_if_no_acl_found: bool = False,
    ) -> None:
        self.super_users = frozenset({SERVICE_PRINCIPAL, *super_users})
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._acls: set[AclBinding] = set()
        self._index: dict[ResourceType, _TypeIndex] = {}
        self._cache: dict[_Key, bool] = {}
        self.version = 0
        self.replace(acls)

    # -- the ACL set ---------------------------------------------------------------------

    @property
    def acls(self) -> frozenset[AclBinding]:
        return frozenset(self._acls)

    def replace(self, acls: Iterable[AclBinding]) -> None:
        """Hold exactly ``acls`` from now on."""
        self._acls = set(acls)
        self._rebuild()

    def apply(self, added: Iterable[AclBinding] = (), removed: Iterable[AclBinding] = ()) -> None:
        """Add and remove ACLs (a watch batch)."""
        self._acls.difference_update(removed)
        self._acls.update(added)
        self._rebuild()

    def _rebuild(self) -> None:
        index: dict[ResourceType, _TypeIndex] = {}
        for acl in self._acls:
            index.setdefault(acl.resource_type, _TypeIndex()).add(acl)
        for type_index in index.values():
            type_index.finish()
        self._index = index
        self._cache = {}
        self.version += 1

    # -- decisions -----------------------------------------------------------------------

    def is_super_user(self, principal: str) -> bool:
        return principal in self.super_users

    def authorize(
        self,
        principal: str,
        host: str,
        operation: Operation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        """May ``principal`` connecting from ``host`` do ``operation`` on the resource?"""
        # Enum members hash through a Python-level __hash__: key on their str values.
        key = (principal, host, operation._value_, resource_type._value_, name)
        decision = self._cache.get(key)
        if decision is None:
            decision = self._decide(principal, host, operation, resource_type, name)
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()
            self._cache[key] = decision
        return decision

    def _decide(
        self,
        principal: str,
        host: str,
        operation: Operation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        if principal in self.super_users:
            return True
        index = self._index.get(resource_type)
        acls = index.matching(name) if index is not None else []
        if not acls:
            return self.allow_everyone_if_no_acl_found
        wildcard_principal = principal.partition(":")[0] + ":" + WILDCARD
        allowed_by = implied_by(operation)
        allowed = False
        for acl in acls:
            if acl.principal not in (principal, wildcard_principal):
                continue
            if acl.host not in (WILDCARD, host):
                continue
            if acl.permission is Permission.DENY:
                if acl.operation is operation or acl.operation is Operation.ALL:
                    return False
            elif acl.operation in allowed_by:
                allowed = True
        return allowed

    def allowed_on_some(
        self, principal: str, host: str, operation: Operation, resource_type: ResourceType
    ) -> bool:
        """Whether an ALLOW ACL lets ``principal`` do ``operation`` on some resource of the
        type (Kafka's rule for idempotent producers: WRITE on any topic). Scans the type's
        ACLs: for rare requests only."""
        if principal in self.super_users:
            return True
        index = self._index.get(resource_type)
        if index is None:
            return False
        wildcard_principal = principal.partition(":")[0] + ":" + WILDCARD
        for acl in index.literal.get(WILDCARD, ()):  # denied on every resource: on none
            if (
                acl.permission is Permission.DENY
                and acl.operation in (operation, Operation.ALL)
                and acl.principal in (principal, wildcard_principal)
                and acl.host in (WILDCARD, host)
            ):
                return False
        allowed_by = implied_by(operation)
        for group in (*index.literal.values(), *index.prefixed.values()):
            for acl in group:
                if (
                    acl.permission is Permission.ALLOW
                    and acl.operation in allowed_by
                    and acl.principal in (principal, wildcard_principal)
                    and acl.host in (WILDCARD, host)
                ):
                    return True
        return False

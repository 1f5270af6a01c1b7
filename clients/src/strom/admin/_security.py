"""The admin client's users and ACLs: the gateway's Security service (docs/security.md).

Creating a user sends its salted password (``Hi(password, salt, iterations)``, KIP-554),
never the password. A cluster without security has no Security service: its calls fail with
``UnsupportedVersionError`` ("security is not enabled on this cluster").
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import Any

from strom.cluster import ClusterClient, translate_errors
from strom.errors import BrokerResponseError, UnsupportedVersionError, for_code
from strom.protocol.v1 import security_pb2, security_pb2_grpc
from strom.security.acl import AclBinding, AclFilter
from strom.security.scram import DEFAULT_ITERATIONS, hash_name, salted_password

__all__ = ["SecurityAdmin"]


def _binding(message: security_pb2.AclBinding) -> AclBinding:
    return AclBinding.from_dict({f.name: v for f, v in message.ListFields()})


def _filter_message(acl_filter: AclFilter | AclBinding) -> security_pb2.AclBinding:
    if isinstance(acl_filter, AclBinding):
        return security_pb2.AclBinding(**acl_filter.to_dict())
    return security_pb2.AclBinding(
        resource_type=acl_filter.resource_type or "",
        resource_name=acl_filter.resource_name or "",
        pattern_type=acl_filter.pattern_type or "",
        principal=acl_filter.principal or "",
        host=acl_filter.host or "",
        operation=acl_filter.operation or "",
        permission_type=acl_filter.permission or "",
    )


def _raise(code: int, message: str) -> None:
    if code:
        raise for_code(code, message)


class SecurityAdmin:
    """Users and ACLs through ``cluster``'s gateway channel."""

    def __init__(self, cluster: ClusterClient, timeout_s: float) -> None:
        self._cluster = cluster
        self._timeout = timeout_s

    async def _call(self, method: str, request: object) -> Any:
        stub = security_pb2_grpc.SecurityStub(self._cluster.gateway_channel)
        try:
            with translate_errors(self._cluster.gateway_address):
                return await getattr(stub, method)(request, timeout=self._timeout)
        except UnsupportedVersionError as exc:
            raise UnsupportedVersionError(
                "security is not enabled on this cluster (no Security service): "
                "see docs/security.md"
            ) from exc

    async def upsert_user(
        self,
        name: str,
        password: str,
        mechanism: str = "SCRAM-SHA-256",
        iterations: int = DEFAULT_ITERATIONS,
    ) -> None:
        hash_name(mechanism)
        salt = secrets.token_bytes(16)
        upsert = security_pb2.UserScramCredentialUpsertion(
            name=name,
            mechanism=mechanism.upper(),
            iterations=iterations,
            salt=salt,
            salted_password=salted_password(mechanism, password, salt, iterations),
        )
        response = await self._call(
            "AlterUserScramCredentials",
            security_pb2.AlterUserScramCredentialsRequest(upsertions=[upsert]),
        )
        for result in response.results:
            _raise(result.error_code, result.error_message)

    async def delete_user(self, name: str, mechanism: str = "") -> None:
        deletion = security_pb2.UserScramCredentialDeletion(name=name, mechanism=mechanism)
        response = await self._call(
            "AlterUserScramCredentials",
            security_pb2.AlterUserScramCredentialsRequest(deletions=[deletion]),
        )
        for result in response.results:
            _raise(result.error_code, result.error_message)

    async def describe_users(self, names: Sequence[str] = ()) -> dict[str, list[tuple[str, int]]]:
        """user -> [(mechanism, iterations)]."""
        response = await self._call(
            "DescribeUserScramCredentials",
            security_pb2.DescribeUserScramCredentialsRequest(users=list(names)),
        )
        found: dict[str, list[tuple[str, int]]] = {}
        for user in response.users:
            _raise(user.error_code, user.error_message)
            found[user.name] = [(c.mechanism, c.iterations) for c in user.credentials]
        return found

    async def create_acls(self, acls: Sequence[AclBinding]) -> None:
        response = await self._call(
            "CreateAcls",
            security_pb2.CreateAclsRequest(creations=[_filter_message(a) for a in acls]),
        )
        errors: list[BrokerResponseError] = [
            for_code(r.error_code, r.error_message) for r in response.results if r.error_code
        ]
        if errors:
            raise errors[0]

    async def delete_acls(self, acl_filter: AclFilter | AclBinding) -> list[AclBinding]:
        response = await self._call(
            "DeleteAcls", security_pb2.DeleteAclsRequest(filters=[_filter_message(acl_filter)])
        )
        deleted: list[AclBinding] = []
        for result in response.results:
            _raise(result.error_code, result.error_message)
            deleted.extend(_binding(b) for b in result.deleted)
        return deleted

    async def describe_acls(self, acl_filter: AclFilter | None = None) -> list[AclBinding]:
        response = await self._call(
            "DescribeAcls",
            security_pb2.DescribeAclsRequest(filter=_filter_message(acl_filter or AclFilter())),
        )
        _raise(response.error_code, response.error_message)
        return [_binding(b) for b in response.acls]

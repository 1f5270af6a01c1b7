"""The ``Security`` gRPC service (served by the gateway): logins, SCRAM users and ACLs.

Thin: each RPC converts the request, calls the ``ScramAuthenticator`` or the
``SecurityStore``, and converts the answer. Who may call what is the guard's business
(``strom_server.security.rules``): users and ACLs need ALTER or DESCRIBE on the cluster.
"""

from __future__ import annotations

from strom.errors import BrokerResponseError, ConfigurationError, InvalidRequestError
from strom.protocol.v1 import security_pb2, security_pb2_grpc
from strom.security.acl import AclBinding, AclFilter
from strom.security.scram import hash_name, make_credential
from strom_server.rpc.errors import error_fields
from strom_server.rpc.server import ServicerContext
from strom_server.security.authentication import ScramAuthenticator
from strom_server.security.guard import peer_host
from strom_server.security.store import SecurityStore

__all__ = ["SecurityServicer"]


def _binding_message(acl: AclBinding) -> security_pb2.AclBinding:
    return security_pb2.AclBinding(**acl.to_dict())


def _fields(message: security_pb2.AclBinding) -> dict[str, str]:
    return {f.name: value for f, value in message.ListFields()}


class SecurityServicer(security_pb2_grpc.SecurityServicer):
    def __init__(self, authenticator: ScramAuthenticator, store: SecurityStore) -> None:
        self._authenticator = authenticator
        self._store = store

    async def Authenticate(
        self, request: security_pb2.AuthenticateRequest, context: ServicerContext
    ) -> security_pb2.AuthenticateResponse:
        host = peer_host(context.peer())
        try:
            if not request.session_id:
                session, server_first = await self._authenticator.first(
                    request.mechanism, request.message, host
                )
                return security_pb2.AuthenticateResponse(message=server_first, session_id=session)
            result = await self._authenticator.final(request.session_id, request.message, host)
        except BrokerResponseError as exc:
            code, message = error_fields(exc)
            return security_pb2.AuthenticateResponse(error_code=code, error_message=message)
        return security_pb2.AuthenticateResponse(
            message=result.server_final,
            token=result.token,
            token_lifetime_ms=int(result.lifetime_s * 1000),
            principal=result.principal,
        )

    async def AlterUserScramCredentials(
        self, request: security_pb2.AlterUserScramCredentialsRequest, context: ServicerContext
    ) -> security_pb2.AlterUserScramCredentialsResponse:
        results = []
        error: BrokerResponseError | None
        for upsert in request.upsertions:
            try:
                if not upsert.name:
                    raise InvalidRequestError("the user name is empty")
                hash_name(upsert.mechanism)
                credential = make_credential(
                    upsert.mechanism, upsert.salted_password, upsert.salt, upsert.iterations
                )
                await self._store.put_credential(upsert.name, credential)
                error = None
            except ConfigurationError as exc:
                error = InvalidRequestError(str(exc))
            except BrokerResponseError as exc:
                error = exc
            code, message = error_fields(error)
            results.append(
                security_pb2.AlterUserScramCredentialsResponse.Result(
                    user=upsert.name, error_code=code, error_message=message
                )
            )
        for deletion in request.deletions:
            found = await self._store.delete_credential(deletion.name, deletion.mechanism)
            code, message = error_fields(
                None if found else InvalidRequestError(f"no such user: {deletion.name}")
            )
            results.append(
                security_pb2.AlterUserScramCredentialsResponse.Result(
                    user=deletion.name, error_code=code, error_message=message
                )
            )
        return security_pb2.AlterUserScramCredentialsResponse(results=results)

    async def DescribeUserScramCredentials(
        self, request: security_pb2.DescribeUserScramCredentialsRequest, context: ServicerContext
    ) -> security_pb2.DescribeUserScramCredentialsResponse:
        users = await self._store.users()
        names = list(request.users) or sorted(users)
        described = []
        Answer = security_pb2.DescribeUserScramCredentialsResponse
        for name in names:
            credentials = users.get(name)
            if credentials is None:
                code, message = error_fields(InvalidRequestError(f"no such user: {name}"))
                described.append(Answer.User(name=name, error_code=code, error_message=message))
                continue
            described.append(
                Answer.User(
                    name=name,
                    credentials=[
                        Answer.Credential(mechanism=c.mechanism, iterations=c.iterations)
                        for c in credentials
                    ],
                )
            )
        return Answer(users=described)

    async def CreateAcls(
        self, request: security_pb2.CreateAclsRequest, context: ServicerContext
    ) -> security_pb2.CreateAclsResponse:
        results = []
        for creation in request.creations:
            try:
                await self._store.create_acl(AclBinding.from_dict(_fields(creation)))
                error = None
            except (ConfigurationError, KeyError) as exc:
                error = InvalidRequestError(f"invalid ACL: {exc}")
            code, message = error_fields(error)
            results.append(security_pb2.AclResult(error_code=code, error_message=message))
        return security_pb2.CreateAclsResponse(results=results)

    async def DeleteAcls(
        self, request: security_pb2.DeleteAclsRequest, context: ServicerContext
    ) -> security_pb2.DeleteAclsResponse:
        results = []
        for filter_message in request.filters:
            try:
                acl_filter = AclFilter.from_dict(_fields(filter_message))
            except ConfigurationError as exc:
                code, message = error_fields(InvalidRequestError(str(exc)))
                results.append(
                    security_pb2.DeleteAclsResponse.FilterResult(
                        error_code=code, error_message=message
                    )
                )
                continue
            deleted = await self._store.delete_acls(acl_filter)
            results.append(
                security_pb2.DeleteAclsResponse.FilterResult(
                    deleted=[_binding_message(a) for a in deleted]
                )
            )
        return security_pb2.DeleteAclsResponse(results=results)

    async def DescribeAcls(
        self, request: security_pb2.DescribeAclsRequest, context: ServicerContext
    ) -> security_pb2.DescribeAclsResponse:
        try:
            acl_filter = AclFilter.from_dict(_fields(request.filter))
        except ConfigurationError as exc:
            code, message = error_fields(InvalidRequestError(str(exc)))
            return security_pb2.DescribeAclsResponse(error_code=code, error_message=message)
        acls = sorted(
            (a for a in await self._store.acls() if acl_filter.matches(a)),
            key=lambda a: (a.resource_type, a.resource_name, a.principal, a.operation),
        )
        return security_pb2.DescribeAclsResponse(acls=[_binding_message(a) for a in acls])

"""Authenticates and authorizes every request a service serves, before its handler runs.

``RequestGuard.wrap(method, handler)`` returns the method's handler guarded: it finds the
caller's principal (a token in ``authorization: Bearer ...``, else with
``ssl.client.auth=required`` the client certificate's CN, else ``User:ANONYMOUS`` where the
protocol allows it), applies the method's rule (``strom_server.security.rules``) to the
request (each request of a stream), runs the handler, and cuts list answers to what the caller
may describe. ``GrpcServer`` installs it inside the ``RpcObserver``, so a refusal becomes a
status with its error code like any other error. ``current_principal()`` names the caller
inside a handler.
"""

from __future__ import annotations

import contextvars
import inspect
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
import grpc.aio

from strom.errors import (
    AuthorizationFailedError,
    ClusterAuthorizationFailedError,
    GroupAuthorizationFailedError,
    NetworkExceptionError,
    SaslAuthenticationFailedError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
)
from strom.security.acl import Operation, ResourceType
from strom.security.channels import AUTHORIZATION_KEY, LOGIN_ERROR_KEY
from strom_server.security import audit
from strom_server.security.authorizer import Authorizer
from strom_server.security.rules import PUBLIC_METHODS, Rule, rule_for
from strom_server.security.tokens import TokenVerifier

__all__ = ["ANONYMOUS", "RequestGuard", "current_principal", "peer_host"]

ANONYMOUS = "User:ANONYMOUS"
_BEARER = "Bearer "
_principal: contextvars.ContextVar[str] = contextvars.ContextVar(
    "strom_principal", default=ANONYMOUS
)

_ERRORS: dict[ResourceType, type[AuthorizationFailedError]] = {
    ResourceType.TOPIC: TopicAuthorizationFailedError,
    ResourceType.GROUP: GroupAuthorizationFailedError,
    ResourceType.CLUSTER: ClusterAuthorizationFailedError,
    ResourceType.TRANSACTIONAL_ID: TransactionalIdAuthorizationFailedError,
}


def current_principal() -> str:
    """The principal of the request being served (``User:ANONYMOUS`` outside one)."""
    return _principal.get()


def peer_host(peer: str) -> str:
    """The address part of a gRPC peer (``ipv4:127.0.0.1:5000`` -> ``127.0.0.1``)."""
    kind, _, rest = peer.partition(":")
    if kind == "ipv6":
        return rest.rpartition(":")[0].strip("[]")
    if kind == "ipv4":
        return rest.rpartition(":")[0]
    return rest or peer


class _Caller:
    """One request's caller: principal, host and the checks rules ask for."""

    __slots__ = ("_authorizer", "_method", "clock", "expires", "host", "principal")

    def __init__(
        self,
        principal: str,
        host: str,
        authorizer: Authorizer | None,
        method: str,
        *,
        expires: float | None = None,
        clock: Callable[[], float] = time.time,
    ):
        self.principal = principal
        self.host = host
        self._authorizer = authorizer
        self._method = method
        self.expires = expires
        self.clock = clock

    def allowed(self, operation: Operation, resource_type: ResourceType, name: str) -> bool:
        authorizer = self._authorizer
        return authorizer is None or authorizer.authorize(
            self.principal, self.host, operation, resource_type, name
        )

    def require(self, operation: Operation, resource_type: ResourceType, name: str) -> None:
        error = self.refusal(operation, resource_type, name)
        if error is not None:
            raise error

    def refusal(
        self, operation: Operation, resource_type: ResourceType, name: str
    ) -> AuthorizationFailedError | None:
        if self.allowed(operation, resource_type, name):
            return None
        audit.denied(
            self.principal,
            self.host,
            operation=operation.value,
            resource_type=resource_type.value,
            name=name,
            rpc=self._method,
        )
        return _ERRORS[resource_type](
            f"{self.principal} may not {operation.value} {resource_type.value} '{name}'"
        )

    def check_still_valid(self) -> None:
        """Raise when the token this caller logged in with has expired (a stream's later
        request): the stream ends as Kafka closes a connection whose session expired."""
        if self.expires is not None and self.clock() >= self.expires:
            raise NetworkExceptionError(
                "the login token of this stream has expired: open a new stream with a fresh "
                "token (log in again)"
            )

    def allowed_any(self, operation: Operation, resource_type: ResourceType) -> bool:
        authorizer = self._authorizer
        if authorizer is None:
            return True
        return authorizer.allowed_on_some(self.principal, self.host, operation, resource_type)


async def _refused(requests: AsyncIterator[Any], error: Exception) -> AsyncIterator[Any]:
    """A stream's requests, refused with ``error`` once the first arrives (or the stream's end)."""
    async for _ in requests:
        break
    raise error
    yield  # an async generator


class RequestGuard:
    """Wraps method handlers with authentication and the method's ACL rule."""

    def __init__(
        self,
        *,
        verifier: TokenVerifier | None,
        authorizer: Authorizer | None,
        require_authentication: bool,
        certificate_principals: bool = False,
    ) -> None:
        """``verifier`` checks tokens (None: tokens are refused); ``authorizer`` None allows
        every authenticated request; ``require_authentication`` refuses anonymous callers
        (SASL protocols); ``certificate_principals`` takes a verified client certificate's CN
        as the principal of a call without a token."""
        self.verifier = verifier
        self.authorizer = authorizer
        self.require_authentication = require_authentication
        self.certificate_principals = certificate_principals

    # -- who is calling --------------------------------------------------------------------

    def authenticate(self, context: grpc.aio.ServicerContext[Any, Any]) -> str:
        """The caller's principal; SaslAuthenticationFailedError when it cannot be trusted."""
        return self._authenticate(context)[0]

    def _authenticate(
        self, context: grpc.aio.ServicerContext[Any, Any]
    ) -> tuple[str, float | None]:
        """The caller's principal and, for a token, when it expires."""
        for key, value in context.invocation_metadata() or ():
            if key == AUTHORIZATION_KEY and isinstance(value, str):
                if not value.startswith(_BEARER) or self.verifier is None:
                    raise SaslAuthenticationFailedError("unsupported authorization metadata")
                try:
                    return self.verifier.verify(value[len(_BEARER) :])
                except SaslAuthenticationFailedError as exc:
                    audit.login_failed("", peer_host(context.peer()), str(exc))
                    raise
        if self.certificate_principals:
            names = (context.auth_context() or {}).get("x509_common_name")
            if names:
                return "User:" + names[0].decode(), None
        if self.require_authentication:
            for key, value in context.invocation_metadata() or ():
                if key == LOGIN_ERROR_KEY:
                    raise SaslAuthenticationFailedError(f"the client could not log in: {value}")
            raise SaslAuthenticationFailedError("authentication required: log in first")
        return ANONYMOUS, None

    def caller(self, context: grpc.aio.ServicerContext[Any, Any], method: str) -> _Caller:
        principal, expires = self._authenticate(context)
        clock = self.verifier.clock if self.verifier is not None else time.time
        host = peer_host(context.peer())
        return _Caller(principal, host, self.authorizer, method, expires=expires, clock=clock)

    # -- handlers --------------------------------------------------------------------------

    def wrap(self, method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        """``handler`` guarded (public methods unchanged). A synchronous handler cannot be
        guarded: its calls fail (TypeError) rather than run unchecked."""
        if method in PUBLIC_METHODS:
            return handler
        rule = rule_for(method)
        kinds = (
            ("unary_unary", False, grpc.unary_unary_rpc_method_handler),
            ("unary_stream", False, grpc.unary_stream_rpc_method_handler),
            ("stream_unary", True, grpc.stream_unary_rpc_method_handler),
            ("stream_stream", True, grpc.stream_stream_rpc_method_handler),
        )
        for attribute, streaming, make in kinds:
            behavior = getattr(handler, attribute)
            if behavior is None:
                continue
            guarded = self._guard(method, rule, behavior, streaming)
            if guarded is None:
                raise TypeError(f"{method}: only coroutine handlers can be guarded")
            return make(
                guarded,
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return handler

    def _guard(
        self, method: str, rule: Rule, behavior: Callable[..., Any], streaming: bool
    ) -> Callable[..., Any] | None:
        calls = _MethodCalls(self, method, rule, streaming, inspect.isasyncgenfunction(behavior))
        begin, refusals, entries, filter_ = calls.begin, calls.refusals, calls.entries, calls.filter

        if inspect.isasyncgenfunction(behavior):

            async def guarded_stream(request: Any, context: Any) -> AsyncIterator[Any]:
                request, token, caller, _ = begin(request, context)
                pending = refusals.get(caller)
                try:
                    async for answered in behavior(request, context):
                        refused = pending.popleft() if pending else None
                        if refused:
                            assert entries is not None
                            yield entries.answer(answered, refused)
                        else:
                            yield answered
                finally:
                    refusals.pop(caller, None)
                    _principal.reset(token)

            return guarded_stream
        if inspect.iscoroutinefunction(behavior):

            async def guarded(request: Any, context: Any) -> Any:
                request, token, caller, refused = begin(request, context)
                try:
                    # None: an all-or-nothing request with refused entries, answered here.
                    response = None if request is None else await behavior(request, context)
                finally:
                    _principal.reset(token)
                if refused:
                    assert entries is not None
                    response = entries.answer(response, refused)
                if filter_ is not None and not streaming and not isinstance(response, bytes):
                    response = filter_(caller, request, response)
                return response

            return guarded
        return None


class _MethodCalls:
    """The calls of one guarded method: who calls (``begin``) and what of their requests the
    method's rule lets through (``checked`` for a stream's requests)."""

    def __init__(
        self, guard: RequestGuard, method: str, rule: Rule, streaming: bool, generator: bool
    ) -> None:
        authorizing = guard.authorizer is not None
        self._guard = guard
        self._method = method
        self._rule = rule
        self._streaming = streaming
        self._check = rule.require if authorizing else None
        self.filter = rule.filter if authorizing else None
        self.entries = rule.entries if authorizing else None
        # A stream's refused entries, oldest first, per call: its handler answers each request
        # in turn (ProduceStream, FetchStream), and each answer gets its request's refusals.
        # Other streams are checked whole.
        self._per_entry_stream = self.entries is not None and generator
        self.refusals: dict[_Caller, deque[list[tuple[Any, Exception]]]] = {}

    async def checked(self, requests: AsyncIterator[Any], caller: _Caller) -> AsyncIterator[Any]:
        pending = self.refusals.get(caller)
        async for received in requests:
            caller.check_still_valid()
            request = received
            if pending is not None:
                request, refused = self._rule.split(caller, request, refuse_whole=False)
                pending.append(refused)
            elif self._check is not None:
                self._check(caller, request)
            yield request

    def begin(
        self, request: Any, context: Any
    ) -> tuple[Any, contextvars.Token[str], _Caller, list[tuple[Any, Exception]]]:
        """Authenticate the call and check its request (wrap a stream's requests in
        ``checked``): (the request to serve, the principal's context token, the caller, the
        refused entries of a unary request)."""
        try:
            caller = self._guard.caller(context, self._method)
        except SaslAuthenticationFailedError as exc:
            if not self._streaming:
                raise
            # Refused at the first request, not before: a client writing its first
            # request while the refusal arrived would see its write fail and the call
            # end as INTERNAL, instead of this error.
            anonymous = _Caller(ANONYMOUS, "", None, self._method)
            return _refused(request, exc), _principal.set(ANONYMOUS), anonymous, []
        refused: list[tuple[Any, Exception]] = []
        if self._streaming:
            if self._per_entry_stream:
                self.refusals[caller] = deque()
            request = self.checked(request, caller)
        elif self.entries is not None:
            request, refused = self._rule.split(caller, request)
        elif self._check is not None:
            self._check(caller, request)
        return request, _principal.set(caller.principal), caller, refused

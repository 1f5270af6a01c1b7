"""A service's security, built from its settings: the listener's credentials, the guard of
its requests, the credentials of its calls to other services, and what the gateway serves.

``ServerSecurity.start(config)`` returns None when security is off (PLAINTEXT without an
authorizer): nothing is installed and nothing costs anything. Otherwise it reads the cluster
secret from etcd (creating it once), starts following the ACLs, and makes every channel that
``strom_server.rpc.channels`` opens carry TLS and a token for ``Service:strom`` that this
service signs itself.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import grpc

from strom.security.channels import ChannelSecurity
from strom_server.etcd.keys import ClusterKeys
from strom_server.etcd.store import EtcdStore
from strom_server.rpc import channels
from strom_server.runtime.config import ServerConfig
from strom_server.security.acl_watch import AclWatch
from strom_server.security.authentication import ScramAuthenticator
from strom_server.security.authorizer import SERVICE_PRINCIPAL, Authorizer
from strom_server.security.guard import RequestGuard
from strom_server.security.servicer import SecurityServicer
from strom_server.security.store import SecurityStore
from strom_server.security.tls import listener_credentials
from strom_server.security.tokens import TokenIssuer, TokenVerifier

__all__ = ["ServerSecurity", "ServiceTokens", "security_enabled"]

_SERVICE_TOKEN_LIFETIME_S = 3600.0


def security_enabled(config: ServerConfig) -> bool:
    return config.security_protocol != "PLAINTEXT" or config.authorizer_enabled


class ServiceTokens:
    """The token source of a service's own calls: ``Service:strom`` tokens it signs, renewed
    when half their lifetime has passed (read on gRPC's threads, hence the lock)."""

    def __init__(self, issuer: TokenIssuer) -> None:
        self._issuer = issuer
        self._lock = threading.Lock()
        self._token = ""
        self._renew_at = 0.0

    def fetch(self) -> str:
        token = self.current
        assert token is not None
        return token

    @property
    def current(self) -> str | None:
        now = time.monotonic()
        with self._lock:
            if now >= self._renew_at:
                self._token = self._issuer.issue(SERVICE_PRINCIPAL)
                self._renew_at = now + self._issuer.lifetime_s / 2
            return self._token


@dataclass
class ServerSecurity:
    """Everything security a service runs with (see the module docstring)."""

    config: ServerConfig
    etcd: EtcdStore
    store: SecurityStore
    guard: RequestGuard
    credentials: grpc.ServerCredentials | None
    channel_security: ChannelSecurity
    authenticator: ScramAuthenticator
    acl_watch: AclWatch | None

    @classmethod
    async def start(cls, config: ServerConfig) -> ServerSecurity | None:
        if not security_enabled(config):
            return None
        protocol = config.security_protocol
        credentials = listener_credentials(
            protocol,
            config.ssl_certfile,
            config.ssl_keyfile,
            config.ssl_cafile,
            config.ssl_client_auth,
        )
        etcd = EtcdStore(config.etcd_endpoints)
        keys = ClusterKeys(config.etcd_prefix)
        store = SecurityStore(etcd, keys)
        secret = await store.token_secret()
        issuer = TokenIssuer(secret, config.token_lifetime_ms / 1000)
        authorizer: Authorizer | None = None
        watch: AclWatch | None = None
        if config.authorizer_enabled:
            authorizer = Authorizer(
                super_users=config.super_users,
                allow_everyone_if_no_acl_found=config.allow_everyone_if_no_acl_found,
            )
            watch = AclWatch(etcd, keys, authorizer)
            await watch.start()
        guard = RequestGuard(
            verifier=TokenVerifier(secret),
            authorizer=authorizer,
            require_authentication=protocol.startswith("SASL_"),
            certificate_principals=config.ssl_client_auth == "required",
        )
        # With client certificates asked for, services present theirs to each other too.
        client_certificate = config.ssl_client_auth != "none" and config.ssl_certfile
        outgoing = ChannelSecurity(
            protocol,
            cafile=config.ssl_cafile or None,
            certfile=config.ssl_certfile if client_certificate else None,
            keyfile=config.ssl_keyfile if client_certificate else None,
            tokens=ServiceTokens(TokenIssuer(secret, _SERVICE_TOKEN_LIFETIME_S)),
        )
        channels.configure(outgoing)
        return cls(
            config,
            etcd,
            store,
            guard,
            credentials,
            outgoing,
            ScramAuthenticator(store.credentials, issuer),
            watch,
        )

    def servicer(self) -> SecurityServicer:
        """The Security service (the gateway serves it)."""
        return SecurityServicer(self.authenticator, self.store)

    async def close(self) -> None:
        if self.acl_watch is not None:
            await self.acl_watch.close()
        await self.etcd.close()
        channels.configure(ChannelSecurity.plaintext())

"""The registry's security, built from its settings (docs/schema-registry.md):

- the clients on the ``_schemas`` topic connect with the options in ``command-config`` (a
  Kafka-style properties file, as ``strom --command-config`` reads);
- etcd is reached over TLS with ``etcd.ssl.cafile`` (the service's certificate as client
  certificate), set up by the runner as for every service (``strom_server.runner``);
- the REST API is HTTPS for ``security.protocol`` SSL and SASL_SSL (``ssl.certfile``,
  ``ssl.keyfile``; ``ssl.client.auth`` with ``ssl.cafile`` for client certificates: the shared
  HTTP layer's ``strom_server.http.tls``), asks for HTTP Basic credentials checked against
  Strom's SCRAM users for SASL_SSL and SASL_PLAINTEXT, and checks ACLs with
  ``authorizer.enabled`` (``strom_registry.access``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from strom.security import command_config_options
from strom_registry.access import Access
from strom_registry.config import RegistryConfig
from strom_server.etcd.keys import ClusterKeys
from strom_server.etcd.store import EtcdStore
from strom_server.security.acl_watch import AclWatch
from strom_server.security.authorizer import Authorizer
from strom_server.security.passwords import PasswordChecker
from strom_server.security.store import SecurityStore

__all__ = ["RegistrySecurity", "client_options"]


def client_options(config: RegistryConfig) -> dict[str, Any]:
    """The clients' security options from ``command-config`` (validated; {} without one)."""
    if not config.command_config:
        return {}
    return command_config_options(config.command_config, f"command-config {config.command_config}")


@dataclass
class RegistrySecurity:
    """The REST API's access rules, and the ACL watch behind them."""

    access: Access = field(default_factory=Access)
    acl_watch: AclWatch | None = None

    @classmethod
    async def start(cls, config: RegistryConfig, etcd: EtcdStore) -> RegistrySecurity:
        protocol = config.security_protocol
        security = cls()
        keys = ClusterKeys(config.etcd_prefix)
        if protocol.startswith("SASL_"):
            security.access.passwords = PasswordChecker(SecurityStore(etcd, keys).credentials)
        if config.authorizer_enabled:
            authorizer = Authorizer(
                super_users=config.super_users,
                allow_everyone_if_no_acl_found=config.allow_everyone_if_no_acl_found,
            )
            security.acl_watch = AclWatch(etcd, keys, authorizer)
            await security.acl_watch.start()
            security.access.authorizer = authorizer
        return security

    async def close(self) -> None:
        if self.acl_watch is not None:
            await self.acl_watch.close()

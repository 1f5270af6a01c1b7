"""``python -m strom_registry`` / ``strom-registry``: run one schema registry instance.

Flags, ``STROM_*`` environment variables and a TOML file configure it (``--help`` lists every
setting; docs/schema-registry.md explains them). It reads the ``_schemas`` topic until caught
up (creating it when missing), then serves the REST API and campaigns to be the writer.
Exit codes as every Strom service: 0 after SIGTERM/SIGINT, 1 when serving failed, 2 for a
configuration error.
"""

from __future__ import annotations

import asyncio

from strom.cluster.retry import Backoff
from strom.errors import StromError
from strom_registry.config import RegistryConfig
from strom_registry.election import WriterElection
from strom_registry.http import Node, RegistryApp, build_app
from strom_registry.registry import Registry
from strom_registry.schemas_log import SchemasLog
from strom_registry.security import RegistrySecurity, client_options
from strom_registry.state import RegistryState
from strom_registry.store import TopicStore
from strom_server.etcd.keys import ClusterKeys
from strom_server.etcd.store import EtcdStore
from strom_server.http.service import HttpService
from strom_server.runner import run_http_service
from strom_server.runtime.logs import get_logger
from strom_server.runtime.values import advertised_address

log = get_logger(__name__)

SERVICE = "strom-registry"


async def _start_log(schemas: SchemasLog, stop: asyncio.Event) -> bool:
    """Read the topic until caught up, waiting while the cluster is not reachable yet."""
    backoff = Backoff(0.2, 2.0)
    while not stop.is_set():
        try:
            await schemas.ensure_topic()
            break
        except (StromError, OSError) as exc:
            log.warning("the cluster is not reachable yet; retrying", error=str(exc))
            await backoff.sleep()
    else:
        return False
    await schemas.start()
    return True


async def build(config: RegistryConfig, http: HttpService) -> RegistryApp | None:
    """Load the schemas and build the REST API; once it listens, campaign to be the writer
    (None: stopped before the schemas were loaded)."""
    state = RegistryState()
    schemas = SchemasLog(
        config.bootstrap_servers, state, topic=config.kafkastore_topic,
        replication_factor=config.kafkastore_topic_replication_factor,
        timeout_s=config.kafkastore_timeout_ms / 1000, client_options=client_options(config),
    )  # fmt: skip
    etcd = EtcdStore(config.etcd_endpoints)
    http.on_shutdown(etcd.close)
    security = await RegistrySecurity.start(config, etcd)
    http.on_shutdown(security.close)
    http.on_shutdown(schemas.close)
    if not await _start_log(schemas, http.stop_requested):
        return None
    log.info("schemas loaded", subjects=len(state.subjects), schemas=len(state.schemas),
             offset=schemas.position)  # fmt: skip
    election = WriterElection(
        etcd, ClusterKeys(config.etcd_prefix), instance_id=config.instance_id, url="",
        ttl_s=config.lease_ttl_s, eligible=config.leader_eligibility,
    )  # fmt: skip
    registry = Registry(
        state, TopicStore(schemas, election),
        default_compatibility=config.schema_compatibility_level.upper(),
    )  # fmt: skip
    node = Node(
        registry,
        is_leader=lambda: election.leading,
        leader_url=lambda: election.leader.url if election.leader else None,
        log_position=lambda: schemas.position,
        wait_for=schemas.wait_for,
        forward_timeout_s=config.kafkastore_timeout_ms / 1000,
        access=security.access,
        forward_ssl=http.tls.client,
    )
    app = build_app(node)
    http.on_shutdown(app.close)

    async def campaign(bound: int) -> None:
        adv_host, adv_port = advertised_address(config.listen, "", bound)
        election.url = config.advertised_url or f"{http.tls.scheme}://{adv_host}:{adv_port}"
        election.instance_id = config.instance_id or election.url
        await election.start()
        log.info("serving", url=election.url, port=bound)

    http.on_started(campaign)
    http.on_stopping(election.close)  # the writer steps down while this instance still answers
    return app


def main() -> None:
    description = "Strom schema registry (Confluent's REST API)"
    raise SystemExit(run_http_service(RegistryConfig, SERVICE, build, description=description))


if __name__ == "__main__":
    main()

"""Which handler answers which Kafka API: the dispatch table of the listener."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from strom_gateway.kafka import admin_handlers as admin
from strom_gateway.kafka import data_handlers as data
from strom_gateway.kafka import group_handlers as groups
from strom_gateway.kafka import txn_handlers as txn
from strom_gateway.kafka.backend import Backend, CallFailed
from strom_gateway.kafka.listener import Connection, Dispatch
from strom_gateway.kafka.protocol import messages as m
from strom_gateway.kafka.protocol.frames import Request
from strom_gateway.kafka.security import backend_of, no_sasl_authenticate, no_sasl_handshake

log = structlog.get_logger(__name__)

__all__ = ["HANDLERS", "dispatcher"]

Handler = Callable[[Backend, Request, Connection], Awaitable[dict[str, Any] | None]]

HANDLERS: dict[int, Handler] = {
    m.API_VERSIONS.key: admin.api_versions,
    m.METADATA.key: admin.metadata,
    m.PRODUCE.key: data.produce,
    m.FETCH.key: data.fetch,
    m.LIST_OFFSETS.key: data.list_offsets,
    m.DELETE_RECORDS.key: data.delete_records,
    m.OFFSET_FOR_LEADER_EPOCH.key: data.offset_for_leader_epoch,
    m.FIND_COORDINATOR.key: groups.find_coordinator,
    m.JOIN_GROUP.key: groups.join_group,
    m.SYNC_GROUP.key: groups.sync_group,
    m.HEARTBEAT.key: groups.heartbeat,
    m.LEAVE_GROUP.key: groups.leave_group,
    m.OFFSET_COMMIT.key: groups.offset_commit,
    m.OFFSET_FETCH.key: groups.offset_fetch,
    m.LIST_GROUPS.key: groups.list_groups,
    m.DESCRIBE_GROUPS.key: groups.describe_groups,
    m.DELETE_GROUPS.key: groups.delete_groups,
    m.CREATE_TOPICS.key: admin.create_topics,
    m.DELETE_TOPICS.key: admin.delete_topics,
    m.CREATE_PARTITIONS.key: admin.create_partitions,
    m.DESCRIBE_CONFIGS.key: admin.describe_configs,
    m.ALTER_CONFIGS.key: admin.alter_configs,
    m.INCREMENTAL_ALTER_CONFIGS.key: admin.incremental_alter_configs,
    m.DESCRIBE_CLUSTER.key: admin.describe_cluster,
    m.INIT_PRODUCER_ID.key: txn.init_producer_id,
    m.ADD_PARTITIONS_TO_TXN.key: txn.add_partitions_to_txn,
    m.ADD_OFFSETS_TO_TXN.key: txn.add_offsets_to_txn,
    m.END_TXN.key: txn.end_txn,
    m.TXN_OFFSET_COMMIT.key: txn.txn_offset_commit,
    m.LIST_TRANSACTIONS.key: txn.list_transactions,
    m.DESCRIBE_TRANSACTIONS.key: txn.describe_transactions,
    m.DESCRIBE_PRODUCERS.key: txn.describe_producers,
    # A secured listener's gate answers these itself (kafka.security).
    m.SASL_HANDSHAKE.key: no_sasl_handshake,
    m.SASL_AUTHENTICATE.key: no_sasl_authenticate,
}


def dispatcher(backend: Backend, *, secured: bool = False) -> Dispatch:
    """The listener's ``dispatch``: the API's handler, called with the connection's backend
    (``secured``: its principal's, never ``backend`` but for ApiVersions); a whole-request
    failure a handler did not answer itself becomes the response's top-level error code
    where it has one."""

    async def dispatch(request: Request, connection: Connection) -> dict[str, Any] | None:
        handler = HANDLERS[request.api.key]
        serving = backend_of(connection, backend, secured=secured, api=request.api)
        try:
            return await handler(serving, request, connection)
        except CallFailed as exc:
            plain, _ = request.api.response.plan(
                request.version, request.api.flexible(request.version)
            )
            if not any(f.name == "error_code" for f in plain):
                raise
            log.info("kafka request failed", api=request.api.name, error=exc.message)
            return {"error_code": exc.code}

    return dispatch

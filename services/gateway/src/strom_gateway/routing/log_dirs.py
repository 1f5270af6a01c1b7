"""DescribeLogDirs through the gateway: ask every live storage node (or those named) at once.

The live nodes are their etcd registrations (``P/brokers/ids/``), read once per request (one
range read): the gateway's metadata cache knows only the nodes that lead partitions it has
routed to. Each node answers for its own directories; a node that cannot be reached, or an id
that is not a live node, gets an entry with its error code, so one node down does not hide
the others.
"""

from __future__ import annotations

import asyncio
import time

import grpc

from strom.cluster import from_rpc_error
from strom.errors import ErrorCode
from strom.protocol.v1 import storage_pb2
from strom_gateway.routing.leaders import LeaderRouter
from strom_server.etcd.keys import ClusterKeys, decode_value
from strom_server.etcd.store import EtcdStore
from strom_server.rpc.channels import trace_metadata

__all__ = ["LogDirsFanOut"]


class LogDirsFanOut:
    """The gateway's DescribeLogDirs over the storage nodes' own."""

    def __init__(self, store: EtcdStore, keys: ClusterKeys, leaders: LeaderRouter) -> None:
        self._store = store
        self._keys = keys
        self._leaders = leaders

    async def live_nodes(self) -> dict[int, str]:
        """node id -> ``host:port`` of every registered storage node."""
        kvs, _ = await self._store.get_prefix(self._keys.brokers)
        nodes = {}
        for kv in kvs:
            node_id = self._keys.parse_broker_key(kv.key)
            if node_id is None:
                continue
            try:
                value = decode_value(kv.value)
                nodes[node_id] = f"{value['host']}:{int(value['port'])}"
            except (ValueError, KeyError, TypeError):
                continue  # a malformed registration: the node is not reachable through it
        return nodes

    async def describe(
        self, request: storage_pb2.DescribeLogDirsRequest, deadline: float
    ) -> storage_pb2.DescribeLogDirsResponse:
        nodes = await self.live_nodes()
        wanted = list(dict.fromkeys(request.broker_ids)) or sorted(nodes)
        ask = storage_pb2.DescribeLogDirsRequest(topics=request.topics)
        answers = await asyncio.gather(
            *(self._one(node_id, nodes.get(node_id), ask, deadline) for node_id in wanted)
        )
        return storage_pb2.DescribeLogDirsResponse(brokers=answers)

    async def _one(
        self,
        node_id: int,
        address: str | None,
        request: storage_pb2.DescribeLogDirsRequest,
        deadline: float,
    ) -> storage_pb2.BrokerLogDirs:
        if address is None:
            return storage_pb2.BrokerLogDirs(
                node_id=node_id,
                error_code=ErrorCode.BROKER_NOT_AVAILABLE,
                error_message=f"node {node_id} is not a live storage node",
            )
        try:
            answer = await self._leaders.stub(address).DescribeLogDirs(
                request,
                timeout=max(deadline - time.monotonic(), 0.001),
                metadata=trace_metadata(),
            )
        except grpc.aio.AioRpcError as exc:
            problem = from_rpc_error(exc, address)
            code = getattr(problem, "code", ErrorCode.UNKNOWN_SERVER_ERROR)
            if exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                code = ErrorCode.BROKER_NOT_AVAILABLE
            return storage_pb2.BrokerLogDirs(
                node_id=node_id, address=address, error_code=code, error_message=str(problem)
            )
        found = answer.brokers[0] if answer.brokers else storage_pb2.BrokerLogDirs()
        found.node_id = node_id
        found.address = address
        return found

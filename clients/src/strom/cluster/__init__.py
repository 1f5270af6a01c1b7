"""The shared cluster client: what every Strom client is built on, and what services, the
Spark connector and the benchmarks may use when they talk to a cluster as a client.

- ``ClusterClient`` (``strom.cluster.client``): bootstrap through the gateway (``Metadata``),
  cached brokers and partition leaders, one grpc.aio channel per storage node (or everything
  through the gateway with ``gateway_only``); ``parse_servers`` reads a server list.
- ``list_offsets``, ``storage_call``, ``METADATA_ERRORS``, ``where`` (``strom.cluster.offsets``):
  calls to partition leaders with the client's retry rules.
- ``channel_options``, ``from_rpc_error``, ``translate_errors`` (``strom.cluster.transport``):
  gRPC channel settings, and the one translation of gRPC failures into ``strom.errors``.
- ``BackgroundLoop`` (``strom.cluster.loop``): the event-loop thread the synchronous facades run
  the asyncio clients on.

Applications use ``strom`` and ``strom.aio`` instead; see docs/clients.md.
"""

from strom.cluster.client import (
    DEFAULT_BOOTSTRAP_SERVERS,
    ClusterClient,
    PartitionLeader,
    parse_servers,
)
from strom.cluster.loop import BackgroundLoop
from strom.cluster.offsets import METADATA_ERRORS, list_offsets, storage_call, where
from strom.cluster.transport import (
    DEFAULT_MAX_MESSAGE_SIZE,
    channel_options,
    from_rpc_error,
    translate_errors,
)

__all__ = [
    "DEFAULT_BOOTSTRAP_SERVERS",
    "DEFAULT_MAX_MESSAGE_SIZE",
    "METADATA_ERRORS",
    "BackgroundLoop",
    "ClusterClient",
    "PartitionLeader",
    "channel_options",
    "from_rpc_error",
    "list_offsets",
    "parse_servers",
    "storage_call",
    "translate_errors",
    "where",
]

"""Connect to etcd (one endpoint or several, for an etcd cluster).

The ``etcd3`` client (python3-etcd3) is synchronous and gRPC-based: from async code call it
through ``asyncio.to_thread``; its watch callbacks run on the client's own thread, so hop back
to the event loop with ``loop.call_soon_threadsafe``.
"""

from __future__ import annotations

from collections.abc import Sequence

import etcd3

from strom_server.values import split_endpoint

__all__ = ["connect_etcd"]


def connect_etcd(endpoints: Sequence[str], *, timeout_s: float = 5.0) -> etcd3.Etcd3Client:
    """A client for ``endpoints`` (host:port, optionally http://); fails over between several."""
    if not endpoints:
        raise ValueError("no etcd endpoints configured")
    parsed = [split_endpoint(e) for e in endpoints]
    if len(parsed) == 1:
        host, port = parsed[0]
        return etcd3.client(host=host, port=port, timeout=timeout_s)
    return etcd3.MultiEndpointEtcd3Client(  # type: ignore[no-any-return]
        endpoints=[etcd3.Endpoint(host, port, secure=False) for host, port in parsed],
        timeout=timeout_s,
        failover=True,
    )

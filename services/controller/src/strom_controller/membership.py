"""This controller's registration: ``P/controller/members/<id>`` on its own lease, kept alive.

The election key names only the active controller; the registration lists every running one,
standbys included, so that the gateway can report them all (``MetadataResponse.controllers``).
It is informational: nothing is fenced or decided on it. It is the shared lease registration
(``strom_server.etcd.lease_registration``) with a plain put: a lost lease (etcd unreachable
past the TTL) is followed by a fresh lease and registration; closing revokes the lease so the
key goes at once.

Not thread-safe: one event loop.
"""

from __future__ import annotations

from strom_controller.keys import encode
from strom_server.etcd.keys import ClusterKeys
from strom_server.etcd.lease_registration import LeaseRegistration
from strom_server.etcd.store import EtcdStore
from strom_server.runtime.clock import Clock

__all__ = ["controller_membership"]


def controller_membership(
    store: EtcdStore,
    keys: ClusterKeys,
    *,
    controller_id: int,
    host: str,
    port: int,
    ttl_s: int,
    clock: Clock,
) -> LeaseRegistration:
    """The registration of controller ``controller_id`` at ``host:port`` (``run`` it as a task,
    ``close`` it on shutdown)."""
    key = keys.controller_member(controller_id)
    value = encode({"id": controller_id, "host": host, "port": port})
    return LeaseRegistration(
        store, what="controller registration", ttl_s=ttl_s, clock=clock,
        write=lambda lease: store.put(key, value, lease=lease),
    )  # fmt: skip

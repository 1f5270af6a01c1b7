"""Broker registrations: what changed between two views of ``P/brokers/ids/``, and the exact
transaction a storage node registers with (create-if-absent on its own lease).

A registration is ``P/brokers/ids/<id>`` = ``{"id", "host", "port", "rack"}`` attached to the
node's lease; the node writes it only if the key is absent, so a second node with an id in use
fails the transaction and refuses to start (DUPLICATE_BROKER_REGISTRATION). The broker epoch is
the key's create_revision: a node that restarts gets a new one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from strom_controller.keys import BrokerRecord, KeyLayout
from strom_server.etcd.store import Compare, Put

__all__ = ["BrokerChanges", "BrokerTracker", "registration_txn"]


def registration_txn(
    keys: KeyLayout, record: BrokerRecord, lease_id: int
) -> tuple[list[Compare], list[Put]]:
    """(compares, success ops) of a storage node's registration transaction."""
    key = keys.broker(record.id)
    return [Compare.absent(key)], [Put(key, record.to_json(), lease=lease_id)]


@dataclass(frozen=True)
class BrokerChanges:
    joined: tuple[int, ...] = ()
    left: tuple[int, ...] = ()
    restarted: tuple[int, ...] = ()  # same id, new broker epoch

    def __bool__(self) -> bool:
        return bool(self.joined or self.left or self.restarted)


class BrokerTracker:
    """Remembers the last broker set it saw and reports the difference."""

    def __init__(self) -> None:
        self._known: dict[int, int] = {}  # id -> broker epoch

    def observe(self, brokers: Mapping[int, BrokerRecord]) -> BrokerChanges:
        now = {b: r.epoch for b, r in brokers.items()}
        changes = BrokerChanges(
            joined=tuple(sorted(b for b in now if b not in self._known)),
            left=tuple(sorted(b for b in self._known if b not in now)),
            restarted=tuple(
                sorted(b for b in now if b in self._known and self._known[b] != now[b])
            ),
        )
        self._known = now
        return changes

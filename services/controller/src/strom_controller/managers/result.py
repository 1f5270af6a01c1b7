"""``ControllerResult``: what a manager decided, as etcd effects plus the response to send.

The runtime (``strom_controller.controller``) commits ``effects`` in one transaction guarded by
the controller's election key and ``compares`` (split into several transactions, in order, if
there are more than ``MAX_TXN_OPS``), applies them to the metadata cache, then answers with
``response``. Managers never perform I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generic, TypeVar

from strom_server.etcd.store import Compare, Op

__all__ = ["MAX_TXN_OPS", "ControllerResult"]

T = TypeVar("T")

MAX_TXN_OPS = 100
"""Operations per etcd transaction (etcd refuses more than --max-txn-ops, 128 by default)."""


@dataclass
class ControllerResult(Generic[T]):
    effects: list[Op] = field(default_factory=list)
    response: T | None = None
    compares: list[Compare] = field(default_factory=list)

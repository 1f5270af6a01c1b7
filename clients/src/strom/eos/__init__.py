"""Exactly-once consume-transform-produce: ``TransactionalLoop`` (synchronous,
``strom.TransactionalLoop``) and its asyncio twin (``strom.eos.aio.TransactionalLoop``,
``strom.aio.TransactionalLoop``) read a topic with a read_committed consumer in a group, call
the user's function on each record and write what it returns, committing the outputs and the
input offsets in one transaction per batch of polls. See docs/transactions.md.

Public modules: ``loop`` and ``aio`` (the two loops). Internal: ``_batch`` (the output record
type, options, the open transaction's bookkeeping and KIP-691's error classes, shared by both).
"""

from strom.eos._batch import Action, LoopStats, OutputRecord, classify
from strom.eos.loop import TransactionalLoop, Transform

__all__ = ["Action", "LoopStats", "OutputRecord", "TransactionalLoop", "Transform", "classify"]

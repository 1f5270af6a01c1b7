"""The service's ``SchemaStore``: the ``_schemas`` topic, written only while elected."""

from __future__ import annotations

from collections.abc import Sequence

from strom_registry.election import WriterElection
from strom_registry.records import Record
from strom_registry.schemas_log import SchemasLog

__all__ = ["TopicStore"]


class TopicStore:
    """Writes go to the topic after etcd confirms this instance is still the writer.

    ``sync`` reads the topic to its end once per term (each election won): every record
    acknowledged before the election is then applied, and later ones are this writer's own,
    applied before each write returns."""

    def __init__(self, log: SchemasLog, election: WriterElection) -> None:
        self.log = log
        self.election = election
        self._synced_term = -1

    async def sync(self) -> None:
        term = self.election.term
        if self.election.leading and term == self._synced_term:
            return
        await self.log.sync()
        self._synced_term = term

    async def write(self, batch: Sequence[Record]) -> None:
        await self.election.check_leading()
        await self.log.append(batch)

    async def next_id(self, at_least: int) -> int:
        return await self.election.next_id(at_least)

"""Replication over the network: followers fetching from leaders (``fetcher``) and leaders
sending ISR changes to the controller (``isr_updates``). The decisions they carry out live in
the domain (``strom_storage.node``): this package only moves requests and responses."""

from strom_storage.replication.fetcher import FetcherSettings, ReplicaFetcherManager
from strom_storage.replication.isr_updates import AlterPartitionClient

__all__ = ["AlterPartitionClient", "FetcherSettings", "ReplicaFetcherManager"]

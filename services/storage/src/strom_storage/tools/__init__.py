"""Offline tools over a storage node's files (``strom dump-log``): never on a node's hot path."""

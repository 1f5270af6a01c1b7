"""The network side of transactions on a storage node: asking transaction coordinators to
verify a transaction's first write to a partition (``coordinator_verifier``). The decisions
are domain code in ``strom_storage.node.txn``."""

from strom_storage.txn.coordinator_verifier import CoordinatorTxnVerifier

__all__ = ["CoordinatorTxnVerifier"]

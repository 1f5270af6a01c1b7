"""The Strom group and transaction coordinator: consumer groups and their committed offsets
(in ``__consumer_offsets``), and transactions (in ``__transaction_state``).

``group/`` and ``txn/`` are the two domains (state machines, record codecs), ``partitions/``
the hosting of internal-topic partitions they share; the rest is the process around them:
settings (``config``), etcd registration and the ownership of both internal topics' partitions
(``registration``, ``ownership``), the fenced acks=all writer of either topic and the loader
(``offsets_log``, ``loader``), the FindCoordinator directory (``directory``) and metrics
(``stats``). docs/coordinator.md describes the service.
"""

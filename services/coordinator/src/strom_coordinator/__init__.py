"""The Strom group and transaction coordinator: consumer groups and their committed offsets
(in ``__consumer_offsets``), and transactions (in ``__transaction_state``).

``group/`` and ``txn/`` are the two domains (state machines, record codecs), the shards the
coordinator runtime hosts; ``partitions/`` the hosting of internal-topic partitions they share.
``runtime/`` hosts both internal topics' partitions: etcd registration, ownership and fencing,
the fenced acks=all writer of each topic and the loader. The rest is the process around them:
settings (``config``), the FindCoordinator directory (``directory``), the gRPC services and
metrics (``stats``). docs/coordinator.md describes the service.
"""

"""The coordinator runtime: it hosts the partitions of the internal topics
(``__consumer_offsets``, ``__transaction_state``) and feeds each topic's records to its shard
(the group manager, the transaction manager), as Kafka's CoordinatorRuntime does.

``runtime`` is the ``CoordinatorRuntime`` (``host`` a shard per topic, ``start``, ``close``,
``locate``), ``shard`` the interface a shard implements, ``registration`` this process's etcd
registration and the view of ``P/coordinators/`` every topic shares, ``ownership`` the
placement, take-over and fencing of one topic's partitions, ``writer`` the fenced acks=all
writer of a topic, ``loader`` the read of a partition for its replay, and ``peers`` the direct
calls to the other coordinators.
"""

"""The Strom group coordinator: consumer groups and their committed offsets.

``group/`` is the domain (group state machines, the ``__consumer_offsets`` record codec);
the rest is the process around it: settings (``config``), etcd registration and the ownership
of ``__consumer_offsets`` partitions (``ownership``), the fenced acks=all writer and the loader
(``offsets_log``, ``loader``), the FindCoordinator directory (``directory``) and metrics
(``stats``). docs/coordinator.md describes the service.
"""

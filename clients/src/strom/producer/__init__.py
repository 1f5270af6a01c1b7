"""The producer's parts: ``config`` (options), ``partitioner`` (murmur2, sticky),
``accumulator`` and ``batch`` (per-partition batches, record futures: data structures),
``sender`` (the I/O loop), ``idempotence`` (producer id and sequences) and ``producer``
(the synchronous ``strom.Producer``). ``strom.aio.Producer`` ties them together.

Nothing is imported here, so that ``strom.aio`` and this package can import each other's
modules without a cycle; use ``from strom import Producer``.
"""

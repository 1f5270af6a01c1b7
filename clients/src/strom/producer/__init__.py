"""The producer: ``Producer`` (synchronous, ``strom.Producer``) and its asyncio twin
(``strom.producer.aio.Producer``, ``strom.aio.Producer``), with their parts.

Public modules: ``config`` (``ProducerConfig``: every option, declared once), ``partitioner``
(Kafka's murmur2 and the sticky partitioner), ``aio`` and ``producer`` (the two clients).
Internals, used only inside this package: ``_accumulator`` and ``_batch`` (per-partition
batches, record futures), ``_sender`` (the I/O loop), ``_idempotence`` (producer id and
sequences), ``_transactions`` (the transactional state machine and coordinator calls),
``_bulk`` (``send_many``'s one future) and ``_waits`` (what ``send`` waits for).
"""

from strom.producer._batch import RecordFuture, RecordMetadata
from strom.producer._transactions import TransactionAbortedError, is_fatal
from strom.producer.config import ProducerConfig, ProducerOptions
from strom.producer.producer import Producer

__all__ = [
    "Producer",
    "ProducerConfig",
    "ProducerOptions",
    "RecordFuture",
    "RecordMetadata",
    "TransactionAbortedError",
    "is_fatal",
]

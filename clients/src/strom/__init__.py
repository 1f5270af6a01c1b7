"""Strom: a distributed event-streaming platform. This is its client library.

``Producer``, ``Consumer`` and ``Admin`` (synchronous facades over the asyncio clients of
``strom.aio``), the exactly-once consume-transform-produce loop (``TransactionalLoop``,
``strom.eos``), their value types, the error tree (``strom.errors``), the record-batch format
(``strom.records``), the protocol stubs (``strom.protocol.v1``), topic configs
(``strom.topic_config``) and the ``strom`` CLI. See docs/clients.md.
"""

from strom.admin import Admin
from strom.consumer import Consumer, ConsumerGroupMetadata
from strom.eos import OutputRecord, TransactionalLoop
from strom.errors import BrokerResponseError, ConfigurationError, StromError, StromTimeoutError
from strom.producer import Producer, RecordFuture, RecordMetadata
from strom.types import ConsumerRecord, NewTopic, OffsetAndMetadata, TopicPartition

__all__ = [
    "Admin",
    "BrokerResponseError",
    "ConfigurationError",
    "Consumer",
    "ConsumerGroupMetadata",
    "ConsumerRecord",
    "NewTopic",
    "OffsetAndMetadata",
    "OutputRecord",
    "Producer",
    "RecordFuture",
    "RecordMetadata",
    "StromError",
    "StromTimeoutError",
    "TopicPartition",
    "TransactionalLoop",
]
__version__ = "0.1.0"

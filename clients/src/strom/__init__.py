"""Strom: a distributed event-streaming platform. This is its client library.

Today the package holds the protocol stubs (``strom.protocol.v1``), the record-batch format
(``strom.records``), the error tree (``strom.errors``), topic configs (``strom.topic_config``),
the synchronous ``Admin`` client and the ``strom`` CLI; the producer and consumer arrive with
the client-library issue.
"""

from strom.admin import Admin
from strom.errors import BrokerResponseError, ConfigurationError, StromError, StromTimeoutError
from strom.types import NewTopic, TopicPartition

__all__ = [
    "Admin",
    "BrokerResponseError",
    "ConfigurationError",
    "NewTopic",
    "StromError",
    "StromTimeoutError",
    "TopicPartition",
]
__version__ = "0.1.0"

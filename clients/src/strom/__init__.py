"""Strom: a distributed event-streaming platform. This is its client library.

The producer, consumer and admin clients arrive with the client-library issue; today the
package holds the protocol stubs (``strom.protocol.v1``), the record-batch format
(``strom.records``), the error tree (``strom.errors``) and the ``strom`` CLI.
"""

from strom.errors import BrokerResponseError, ConfigurationError, StromError, StromTimeoutError

__all__ = ["BrokerResponseError", "ConfigurationError", "StromError", "StromTimeoutError"]
__version__ = "0.1.0"

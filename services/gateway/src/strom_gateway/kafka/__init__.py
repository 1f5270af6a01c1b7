"""The gateway's Kafka face: a listener speaking Kafka's wire protocol (kafka-compatibility.md).

``protocol`` is the sans-IO codec (schemas, encoding, the message table, frames); ``listener``
and ``frame_stream`` the connections; ``*_handlers`` turn each request into the calls the gRPC
servicer makes, through ``backend`` (the routers of ``strom_gateway.routing``); ``security``,
``sasl`` and ``principals`` the secured listener; ``start`` builds and starts it.
"""

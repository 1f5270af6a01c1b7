"""Kafka's wire protocol, sans-IO: message schemas, primitive encoding, the message table and
request/response frames. No sockets, event loop, gRPC or routing (an import contract)."""

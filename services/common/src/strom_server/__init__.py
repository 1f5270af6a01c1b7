"""Server plumbing shared by every Strom service: configuration, logging, telemetry, the gRPC
bootstrap and etcd helpers. Services depend on it; the client library never does."""

"""Controller managers, one per concern; each returns a ``ControllerResult`` (effects + response)
computed against the metadata cache and never touches etcd or gRPC itself."""

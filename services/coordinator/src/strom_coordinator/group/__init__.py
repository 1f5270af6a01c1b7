"""The coordinator's domain: consumer groups, their state machine and the __consumer_offsets
records (no gRPC, no protocol stubs)."""

"""Generated protocol stubs of strom.protocol.v1 (from proto/; do not edit)."""

"""Versioned protocol packages (generated stubs live in v1)."""

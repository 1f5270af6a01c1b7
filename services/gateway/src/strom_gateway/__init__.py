"""Strom gateway: the single client entry point of a cluster."""

"""The REST API (aiohttp): thin handlers over ``Registry``, errors as Confluent answers them,
writes forwarded to the elected writer."""

from strom_registry.http.app import Node, build_app

__all__ = ["Node", "build_app"]

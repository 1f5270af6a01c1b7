"""The REST API (Starlette, served by ``strom_server.http``): thin handlers over ``Registry``,
errors as Confluent answers them, writes forwarded to the elected writer."""

from strom_registry.http.app import Node, RegistryApp, build_app

__all__ = ["Node", "RegistryApp", "build_app"]

"""The console's pages, one module per area, each a set of thin handlers
(``async (console, request) -> Response``: read the request, call the cluster or the plain
modules, render a template). The pages never import each other; ``strom_console.routes``
lists which path each handler answers."""

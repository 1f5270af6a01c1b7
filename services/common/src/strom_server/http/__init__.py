"""The HTTP layer of the services that speak HTTP (the web console, the schema registry):
one stack, Starlette apps served by uvicorn on the runner's event loop.

``tls`` (the listener's ``ssl.SSLContext`` from the service's security settings), ``auth``
(the one credential check, HTTP Basic and the console's login both go through), ``sessions``
and ``session_guard`` (browser sessions, CSRF tokens, login and read-only rule, as ASGI
middleware: the console's), ``errors``
(exceptions to HTTP statuses), ``health`` (``/healthz`` and ``/readyz``), ``server``
(``HttpServer``: start, bound port, graceful stop); ``strom_server.runner.run_http_service``
runs one as a service.
"""

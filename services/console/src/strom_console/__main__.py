"""``python -m strom_console`` / ``strom-console``: run the web console (``--help`` for settings).

It runs as every HTTP service does (``strom_server.runner.run_http_service``). Exit codes: 0
after a clean shutdown (SIGTERM/SIGINT), 1 when serving failed, 2 for a configuration error
(printed to stderr).
"""

from __future__ import annotations

from collections.abc import Sequence

from strom_console.app import build_app
from strom_console.config import ConsoleConfig
from strom_console.guard import Guard
from strom_console.web import Console
from strom_server.http.service import HttpService
from strom_server.runner import run_http_service

SERVICE = "strom-console"


async def build(config: ConsoleConfig, http: HttpService) -> Guard:
    """The console and its app; its sampler runs until the service stops."""
    security = config.security_options()
    console = Console(config, config.login_password(security), security)
    console.sampler.start()
    http.on_shutdown(console.close)
    return build_app(console)


def main(argv: Sequence[str] | None = None) -> int:
    return run_http_service(
        ConsoleConfig, SERVICE, build, argv=argv, description="Strom web console"
    )


if __name__ == "__main__":
    raise SystemExit(main())

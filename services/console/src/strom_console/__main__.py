"""``python -m strom_console`` / ``strom-console``: run the web console (``--help`` for settings).

Exit codes: 0 after a clean shutdown (SIGTERM/SIGINT), 1 when serving failed, 2 for a
configuration error (printed to stderr).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import uvicorn

from strom.errors import ConfigurationError
from strom.security import SecurityConfig
from strom_console.app import build_app
from strom_console.config import ConsoleConfig
from strom_server.runtime.config import config_items, load_config
from strom_server.runtime.logs import configure_logging, get_logger
from strom_server.runtime.telemetry import setup_telemetry
from strom_server.runtime.values import split_host_port

log = get_logger(__name__)


def _password(config: ConsoleConfig, secure: bool) -> str | None:
    if not config.user:
        if secure:
            raise ConfigurationError(
                "--command-config connects the console to a secure cluster as a privileged "
                "user: set --user and --password-file so that its pages need a login"
            )
        return None
    if str(config.password_file) in ("", "."):
        raise ConfigurationError("--user needs --password-file (a file whose first line is it)")
    try:
        password = config.password()
    except (OSError, IndexError, UnicodeDecodeError) as exc:
        raise ConfigurationError(
            f"--password-file {config.password_file}: cannot read a password from it ({exc})"
        ) from None
    if not password:
        raise ConfigurationError(f"--password-file {config.password_file}: the password is empty")
    return password


def main(argv: Sequence[str] | None = None) -> int:
    try:
        config = load_config(
            ConsoleConfig, argv, prog="strom-console", description="Strom web console"
        )
        security = config.security_options()
        password = _password(config, SecurityConfig(**security).enabled)
    except ConfigurationError as exc:
        print(f"strom-console: configuration error: {exc}", file=sys.stderr)
        return 2
    configure_logging(config.log_level, config.log_format, service="strom-console")
    items = config_items(config)
    log.info("starting", config=items)
    telemetry = setup_telemetry("strom-console", config.metrics_listen)
    host, port = split_host_port(config.listen)
    try:
        uvicorn.run(
            build_app(config, password, security),
            host=host,
            port=port,
            log_config=None,
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=5,
        )
    except Exception:
        log.exception("console failed")
        return 1
    finally:
        telemetry.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""What every console page shares: the ``Console`` (config, cluster clients, sampler,
searches, sessions, templates), the parsing of form and query parameters, and ``endpoint``,
which turns a page handler into a Starlette endpoint whose failures are error pages.

A page handler is ``async (console, request) -> Response`` (``Handler``); the pages live in
``strom_console.pages``, their routes in ``strom_console.routes``.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import jinja2
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from strom.aio import Admin, Producer
from strom.errors import ConfigurationError, StromError
from strom.serde import SchemaRegistryClient, SchemaRegistryError
from strom_console import browse, filters
from strom_console.config import ConsoleConfig
from strom_console.guard import session_of
from strom_console.sampler import Sampler, Snapshot
from strom_console.search import SearchJobs
from strom_server.http.auth import CredentialCheck, OneUser
from strom_server.http.errors import status_for
from strom_server.http.sessions import Sessions
from strom_server.runtime.logs import get_logger

__all__ = [
    "PER_PAGE",
    "BadInput",
    "Console",
    "Handler",
    "endpoint",
    "form_field",
    "int_param",
    "registry_client",
]

log = get_logger(__name__)
_HERE = Path(__file__).parent
#: Rows per page of the paged lists (topics, groups, subjects).
PER_PAGE = 100


class BadInput(ValueError):
    """A form or query parameter is wrong; shown to the user with status 400."""


class Console:
    """What the handlers share: the config, the cluster clients, the sampler, the searches."""

    def __init__(
        self, config: ConsoleConfig, password: str | None, security: dict[str, Any] | None = None
    ) -> None:
        self.config = config
        #: The login's check (``--user``, ``--password-file``); None: no login.
        self.login: CredentialCheck | None = (
            OneUser(config.user, password) if password is not None else None
        )
        #: Where and how every client of the console connects: the gateway, security options.
        self.connection: dict[str, Any] = {
            "bootstrap_servers": config.bootstrap_servers,
            **(security or {}),
        }
        self.admin = Admin(
            **self.connection,
            request_timeout_ms=config.request_timeout_ms,
            client_id="strom-console",
        )
        self.sampler = Sampler(
            lambda: Admin(
                **self.connection,
                request_timeout_ms=config.request_timeout_ms,
                client_id="strom-console-sampler",
            ),
            interval_s=config.sample_interval_s,
            window_s=config.lag_window_s,
            max_groups=config.lag_groups_max,
            groups_per_sample=config.lag_groups_per_sample,
        )
        self.searches = SearchJobs(self.connection, config.request_timeout_ms)
        #: When the console last changed the cluster: pages wait for a sample taken after it.
        self._changed_at = 0.0
        self.sessions = Sessions()
        self.registry = (
            registry_client(config.schema_registry_url, config.request_timeout_ms, security)
            if config.schema_registry_url
            else None
        )
        self._producer: Producer | None = None
        self.env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(_HERE / "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
        )
        self.env.filters["rate"] = _rate
        self.env.filters["count"] = _count
        self.env.filters["size"] = _size
        self.env.filters["byterate"] = _byte_rate
        self.env.filters["percent"] = _percent

    async def current(self) -> Snapshot:
        """The sampler's latest snapshot; a new sample is awaited (at most the request
        timeout) before the first one, after a change made through the console, and when the
        latest is older than ``--metadata-cache-s``."""
        snap = self.sampler.snapshot
        age = time.time() - snap.taken
        if snap.taken <= self._changed_at or age > self.config.metadata_cache_s:
            snap = await self.sampler.next_sample(self.config.request_timeout_ms / 1000)
        if not snap.taken:
            problem = self.sampler.last_error or "no answer yet"
            raise StromError(f"the console has no sample of the cluster yet: {problem}")
        return snap

    def changed(self) -> None:
        """The console changed the cluster: the next pages wait for a sample taken after
        it, which starts now."""
        self._changed_at = time.time()
        self.sampler.wake()

    async def producer(self) -> Producer:
        if self._producer is None:
            self._producer = Producer(
                **self.connection,
                client_id="strom-console",
                request_timeout_ms=self.config.request_timeout_ms,
                linger_ms=0,
            )
        return self._producer

    async def close(self) -> None:
        await self.searches.close()
        await self.sampler.close()
        if self._producer is not None:
            await self._producer.close()
        await self.admin.close()
        if self.registry is not None:
            self.registry.close()

    def render(self, request: Request, name: str, status: int = 200, **context: Any) -> Response:
        session = session_of(request.scope)
        page = self.env.get_template(name).render(
            csrf=self.sessions.csrf_token(session),
            read_only=self.config.read_only,
            schemas=self.registry is not None,
            user=session.user,
            login=self.login is not None,
            path=request.url.path,
            query=request.url.query,
            **context,
        )
        return HTMLResponse(page, status_code=status)


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}/s"


def _count(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def _size(value: float | None) -> str:
    """Bytes for people: 1,023 B, 1.0 KiB, 12.3 MiB ..."""
    if value is None or value < 0:
        return "-"
    if value < 1024:
        return f"{value:,.0f} B"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1024 or unit == "TiB":
            break
    return f"{value:,.1f} {unit}"


def _byte_rate(value: float | None) -> str:
    return "-" if value is None else f"{_size(value)}/s"


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.0f}%"


def int_param(value: str | None, name: str, default: int | None = None, minimum: int = 0) -> int:
    """The integer a form or query parameter holds (``default`` when it is empty)."""
    if value is None or value.strip() == "":
        if default is None:
            raise BadInput(f"{name} is required")
        return default
    try:
        number = int(value.strip())
    except ValueError:
        raise BadInput(f"{name}: expected an integer, got {value!r}") from None
    if number < minimum:
        raise BadInput(f"{name} must be at least {minimum}, got {number}")
    return number


def form_field(form: FormData, name: str) -> str:
    """A text field of ``form`` ("" when it is missing or a file)."""
    value = form.get(name, "")
    return value if isinstance(value, str) else ""


Handler = Callable[[Console, Request], Awaitable[Response]]


def endpoint(console: Console, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """``handler`` as a Starlette endpoint: a failure is the error page, with its status."""

    async def call(request: Request) -> Response:
        try:
            return await handler(console, request)
        except (BadInput, browse.BrowseError, filters.FilterError) as exc:
            return console.render(request, "error.html", 400, message=str(exc))
        except StromError as exc:  # the shared mapping: 404, 400, 409, a registry's 4xx, 502
            if not isinstance(exc, ConfigurationError | SchemaRegistryError):
                log.info("cluster call failed", path=request.url.path, error=str(exc))
            return console.render(request, "error.html", status_for(exc), message=str(exc))

    return call


def registry_client(
    url: str, timeout_ms: int, security: dict[str, Any] | None
) -> SchemaRegistryClient:
    """The registry as the user the console reaches the cluster as (HTTP Basic with its SASL
    name and password, the cluster's CA for https), as a secure registry expects."""
    security = security or {}
    user, password = security.get("sasl_plain_username"), security.get("sasl_plain_password")
    return SchemaRegistryClient(
        url,
        timeout_s=timeout_ms / 1000,
        basic_auth_user_info=f"{user}:{password}" if user and password is not None else None,
        ssl_cafile=security.get("ssl_cafile") if url.startswith("https://") else None,
    )

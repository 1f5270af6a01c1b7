"""The console's guard: ``strom_server.http.session_guard.SessionGuard`` with the console's
cookie and paths (``security``)."""

from __future__ import annotations

from strom_console.security import PATHS
from strom_server.http.session_guard import ASGIApp, SessionGuard, session_of
from strom_server.http.sessions import Sessions

__all__ = ["Guard", "session_of"]


class Guard(SessionGuard):
    """Session cookie, login, read-only and CSRF in front of every console page."""

    def __init__(
        self,
        app: ASGIApp,
        sessions: Sessions,
        *,
        read_only: bool,
        login_required: bool,
        max_body: int = 32 * 1024 * 1024,
    ) -> None:
        super().__init__(
            app,
            sessions,
            PATHS,
            read_only=read_only,
            login_required=login_required,
            max_body=max_body,
        )

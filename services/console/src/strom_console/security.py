"""The console's sessions: its cookie, the pages reachable without a login, the POSTs that
change nothing, and the rule (``strom_server.http.sessions``: sessions, CSRF tokens, login,
read-only) with them. ``--read-only`` refuses every change; ``--user`` requires a login.
"""

from __future__ import annotations

from strom_server.http import sessions
from strom_server.http.auth import password_ok
from strom_server.http.session_guard import SessionPaths
from strom_server.http.sessions import Decision, Session, Sessions

__all__ = [
    "COOKIE",
    "NOT_CHANGES",
    "PATHS",
    "PUBLIC_PATHS",
    "Decision",
    "Session",
    "Sessions",
    "decide",
    "password_ok",
]

COOKIE = "strom_console_session"
#: POSTs that change nothing in the cluster: allowed in read-only mode (still CSRF-checked).
NOT_CHANGES = ("/login", "/logout", "/search/")
#: Reachable without a login.
PUBLIC_PATHS = ("/login", "/static/", "/healthz", "/readyz")
PATHS = SessionPaths(COOKIE, PUBLIC_PATHS, NOT_CHANGES)


def decide(
    method: str,
    path: str,
    *,
    logged_in: bool,
    login_required: bool,
    read_only: bool,
    csrf_ok: bool,
) -> Decision:
    """The shared rule with the console's paths."""
    return sessions.decide(
        method,
        path,
        logged_in=logged_in,
        login_required=login_required,
        read_only=read_only,
        csrf_ok=csrf_ok,
        public_paths=PUBLIC_PATHS,
        not_changes=NOT_CHANGES,
    )

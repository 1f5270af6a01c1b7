"""The console's sessions: its cookie, the pages reachable without a login and the POSTs that
change nothing, as ``PATHS`` for the shared rule (``strom_server.http.sessions``: sessions,
CSRF tokens, login, read-only) that ``guard`` applies. ``--read-only`` refuses every change;
``--user`` requires a login.
"""

from __future__ import annotations

from strom_server.http.session_guard import SessionPaths

__all__ = ["COOKIE", "NOT_CHANGES", "PATHS", "PUBLIC_PATHS"]

COOKIE = "strom_console_session"
#: POSTs that change nothing in the cluster: allowed in read-only mode (still CSRF-checked).
NOT_CHANGES = ("/login", "/logout", "/search/")
#: Reachable without a login.
PUBLIC_PATHS = ("/login", "/static/", "/healthz", "/readyz")
PATHS = SessionPaths(COOKIE, PUBLIC_PATHS, NOT_CHANGES)

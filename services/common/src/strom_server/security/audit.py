"""The audit log: every refused request and failed login, one structlog event each on the
``strom.audit`` logger (JSON lines in services, beside the service's own log)."""

from __future__ import annotations

from strom_server.runtime.logs import get_logger

__all__ = ["denied", "login_failed"]

_log = get_logger("strom.audit")


def denied(
    principal: str, host: str, *, operation: str, resource_type: str, name: str, rpc: str
) -> None:
    _log.warning(
        "denied",
        audit=True,
        principal=principal,
        host=host,
        operation=operation,
        resource_type=resource_type,
        resource=name,
        rpc=rpc,
    )


def login_failed(user: str, host: str, reason: str) -> None:
    _log.warning("login failed", audit=True, user=user, host=host, reason=reason)

"""Member sessions: a member not heard from within its session timeout expires.

A JoinGroup, SyncGroup, Heartbeat or a member's OffsetCommit restarts the member's session
(``SessionTimers.restart``); a member waiting for its JoinGroup or SyncGroup answer is kept
alive by the rebalance (its session restarts when the timer fires). When a session runs out,
``on_expired`` (the membership state machine) removes the member and rebalances the group.

Safety: asyncio timers on the running event loop (``Member.session_timer``); not thread-safe.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from strom_coordinator.group.model import Group, Member

__all__ = ["SessionTimers"]


class SessionTimers:
    """Starts, restarts and fires the session timers of group members."""

    def __init__(self, on_expired: Callable[[Group, Member], None]) -> None:
        self._on_expired = on_expired

    def restart(self, group: Group, member: Member) -> None:
        """Give ``member`` a fresh session of its ``session_timeout_ms``."""
        member.cancel_timer()
        member.session_timer = asyncio.get_running_loop().call_later(
            member.session_timeout_ms / 1000, self._fire, group, member
        )

    def _fire(self, group: Group, member: Member) -> None:
        member.session_timer = None
        if group.members.get(member.member_id) is not member:
            return
        if member.awaiting_join or member.awaiting_sync:  # kept alive by the rebalance
            self.restart(group, member)
            return
        self._on_expired(group, member)

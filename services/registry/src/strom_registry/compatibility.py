"""Which earlier versions a new schema is checked against, and in which direction.

BACKWARD: the new schema reads data written with the previous one; FORWARD: the previous one
reads data written with the new; FULL: both. ``*_TRANSITIVE`` checks every earlier version
instead of only the latest; NONE checks nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from strom_registry.formats import ParsedSchema

__all__ = ["compatibility_problems"]


def compatibility_problems(
    level: str, new: ParsedSchema, previous: Sequence[ParsedSchema]
) -> list[str]:
    """Why ``new`` breaks ``level`` against ``previous`` (oldest first); empty when it does not."""
    if level == "NONE" or not previous:
        return []
    targets = previous if level.endswith("_TRANSITIVE") else previous[-1:]
    backward = level.startswith(("BACKWARD", "FULL"))
    forward = level.startswith(("FORWARD", "FULL"))
    problems: list[str] = []
    for old in reversed(targets):
        if backward:
            problems += [
                f"the new schema cannot read old data: {p}" for p in new.read_problems(old)
            ]
        if forward:
            problems += [f"old readers cannot read new data: {p}" for p in old.read_problems(new)]
    return problems

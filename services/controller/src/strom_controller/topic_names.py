"""Topic names, Kafka's rules: 1..249 characters of ``[a-zA-Z0-9._-]``, not ``.`` or ``..``.

Because metric names turn ``.`` into ``_``, two topics whose names differ only there (``a.b``
and ``a_b``) would collide; creating the second one is refused (Kafka refuses it too) and a
name containing either character is merely allowed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from strom.errors import InvalidTopicError

__all__ = [
    "INTERNAL_TOPICS",
    "MAX_NAME_LENGTH",
    "colliding_topic",
    "is_internal",
    "unify_collision_chars",
    "validate_topic_name",
]

MAX_NAME_LENGTH = 249
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


def validate_topic_name(name: str) -> None:
    """Raise ``InvalidTopicError`` saying what is wrong with ``name``."""
    if not name:
        raise InvalidTopicError("topic name is empty")
    if name in (".", ".."):
        raise InvalidTopicError(f"topic name cannot be {name!r}")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidTopicError(
            f"topic name is {len(name)} characters long; the maximum is {MAX_NAME_LENGTH}"
        )
    if not _LEGAL.fullmatch(name):
        bad = sorted({c for c in name if not _LEGAL.fullmatch(c)})
        raise InvalidTopicError(
            f"topic name {name!r} contains illegal characters {''.join(bad)!r}; "
            "only ASCII letters, digits, '.', '_' and '-' are allowed"
        )


def is_internal(name: str) -> bool:
    return name in INTERNAL_TOPICS


def unify_collision_chars(name: str) -> str:
    return name.replace(".", "_")


def colliding_topic(name: str, existing: Iterable[str]) -> str | None:
    """An existing topic that differs from ``name`` only by '.' versus '_', if any."""
    unified = unify_collision_chars(name)
    for other in existing:
        if other != name and unify_collision_chars(other) == unified:
            return other
    return None

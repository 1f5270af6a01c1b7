"""Subject name strategies: which subject a topic's keys or values are registered under.

Confluent's three: ``topic_name_strategy`` (``<topic>-key`` / ``<topic>-value``, the default),
``record_name_strategy`` (the record's full name, shared by every topic) and
``topic_record_name_strategy`` (``<topic>-<record full name>``).
"""

from __future__ import annotations

from collections.abc import Callable

from strom.errors import ConfigurationError

__all__ = [
    "SubjectNameStrategy",
    "record_name_strategy",
    "topic_name_strategy",
    "topic_record_name_strategy",
]

SubjectNameStrategy = Callable[[str | None, str | None, bool], str]
"""``(topic, record full name, is_key) -> subject``."""


def topic_name_strategy(topic: str | None, record_name: str | None, is_key: bool) -> str:
    if not topic:
        raise ConfigurationError("the topic name strategy needs the topic (pass topic=...)")
    return f"{topic}-{'key' if is_key else 'value'}"


def record_name_strategy(topic: str | None, record_name: str | None, is_key: bool) -> str:
    if not record_name:
        raise ConfigurationError("the record name strategy needs a named schema (a record)")
    return record_name


def topic_record_name_strategy(topic: str | None, record_name: str | None, is_key: bool) -> str:
    return f"{topic_name_strategy(topic, record_name, is_key).rsplit('-', 1)[0]}-" + (
        record_name_strategy(topic, record_name, is_key)
    )

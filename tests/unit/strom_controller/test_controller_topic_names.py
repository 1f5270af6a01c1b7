"""Kafka's topic-name rules."""

from __future__ import annotations

import pytest

from strom.errors import InvalidTopicError
from strom_controller.topic_names import colliding_topic, is_internal, validate_topic_name


@pytest.mark.parametrize("name", ["a", "orders", "A.b_c-9", "x" * 249, "__consumer_offsets"])
def test_legal_names(name: str) -> None:
    validate_topic_name(name)


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("", "empty"),
        (".", "cannot be"),
        ("..", "cannot be"),
        ("x" * 250, "249"),
        ("a b", "illegal characters ' '"),
        ("a/b", "illegal"),
        ("tópico", "illegal"),
        ("a:b", "illegal"),
    ],
)
def test_illegal_names(name: str, reason: str) -> None:
    with pytest.raises(InvalidTopicError, match=reason):
        validate_topic_name(name)


def test_dot_underscore_collisions() -> None:
    assert colliding_topic("a_b", ["a.b", "c"]) == "a.b"
    assert colliding_topic("a.b", ["a_b"]) == "a_b"
    assert colliding_topic("a.b", ["a.b"]) is None  # the same name is not a collision
    assert colliding_topic("ab", ["a.b"]) is None
    assert is_internal("__consumer_offsets") and not is_internal("orders")

"""The search filter language: what it matches, what it refuses, and that it runs no code."""

from __future__ import annotations

import json

import pytest

from strom_console.filters import FilterError, RecordView, compile_filter, substring_matcher


def record(
    value: object = None,
    *,
    key: bytes | None = b"user-1",
    raw: bytes | None = None,
    headers: tuple[tuple[str, bytes | None], ...] = (),
    offset: int = 10,
) -> RecordView:
    data = raw if raw is not None else (None if value is None else json.dumps(value).encode())
    return RecordView(3, offset, 1700000000000, key, data, headers)


ORDER = {"status": "failed", "amount": 12.5, "items": [{"sku": "a"}, {"sku": "b"}], "n": "7"}


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ('value.status == "failed"', True),
        ('value.status != "failed"', False),
        ("value.amount > 10", True),
        ("value.amount <= 12.5", True),
        ("value.amount < 12", False),
        ('value.items[1].sku == "b"', True),
        ('value.items[5].sku == "b"', False),
        ("value.missing == null", True),
        ("value.missing", False),
        ("value.status", True),
        ('key startswith "user-"', True),
        ('key endswith "-1" and offset >= 10', True),
        ("partition == 3 and not offset > 10", True),
        ('value contains "fail"', True),
        ('value.status == "ok" or (value.amount > 1 and value.n == 7)', True),
        ('headers.source == "batch"', True),
        ('headers["trace-id"] == "x-1"', True),
        ("headers.absent == null", True),
        ('value.n > "10"', False),  # "7" is a number as text: compared as numbers
        ('value.status > "a"', True),  # text compares as text
        ("timestamp > 1600000000000", True),
    ],
)
def test_expressions(expression: str, expected: bool) -> None:
    headers = (("source", b"batch"), ("trace-id", b"x-1"))
    assert compile_filter(expression)(record(ORDER, headers=headers)) is expected


def test_a_value_that_is_not_json_has_no_fields_but_is_still_text() -> None:
    bad = record(raw=b"\xff\xfenot json")
    assert compile_filter("value.status == null")(bad)
    assert compile_filter('value contains "not json"')(bad)


def test_a_null_value_compares_only_as_null() -> None:
    tombstone = record(None)
    assert compile_filter("value == null")(tombstone)
    assert not compile_filter('value contains "x"')(tombstone)
    assert not compile_filter("value > 1")(tombstone)


@pytest.mark.parametrize(
    ("expression", "fragment"),
    [
        ("", "empty"),
        ("value ==", "ends too early"),
        ('__import__("os").system("id")', "unknown name '__import__'"),
        ("value.status == 'x'", "unexpected"),
        ("open(value)", "unknown name 'open'"),
        ("1", "alone is not a condition"),
        ('"a"', "alone is not a condition"),
        ("offset.x == 1", "offset has no fields"),
        ("headers == 1", "headers.NAME"),
        ("value.a = 1", "unexpected"),
        ("(value.a == 1", "ends too early"),
        ("value.a == 1)", "unexpected ')'"),
        ("value[x] == 1", "expected an index"),
        ("value.a == 1 and", "ends too early"),
    ],
)
def test_invalid_expressions_say_what_is_wrong(expression: str, fragment: str) -> None:
    with pytest.raises(FilterError, match=None) as caught:
        compile_filter(expression)
    assert fragment in str(caught.value)


def test_deep_nesting_and_long_expressions_are_refused() -> None:
    with pytest.raises(FilterError, match="deeper"):
        compile_filter("not " * 100 + "value.a")
    with pytest.raises(FilterError, match="longer"):
        compile_filter('value contains "' + "x" * 3000 + '"')


def test_escapes_in_strings() -> None:
    matcher = compile_filter(r'value contains "say \"hi\""')
    assert matcher(record(raw=b'he said "hi"'.replace(b"said", b"say")))


def test_substring_search_looks_at_key_value_and_headers() -> None:
    find = substring_matcher("needle")
    assert find(record(raw=b"hayneedlehay"))
    assert find(record(raw=b"x", key=b"needle-key"))
    assert find(record(raw=b"x", headers=(("h", b"a needle"),)))
    assert find(record(raw=b"x", headers=(("needle", None),)))
    assert not find(record(raw=b"hay", key=None))
    with pytest.raises(FilterError):
        substring_matcher("")

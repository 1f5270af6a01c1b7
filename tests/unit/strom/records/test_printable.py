"""``strom.records.printable``: what ``strom consume`` and ``strom dump-log`` print of record
bytes never carries a raw control character to the terminal."""

from __future__ import annotations

import json

from strom.records.printable import escape_unprintable, json_printable, show_bytes

HOSTILE = "\x1b[2J\x1b]0;owned\x07\x9b31m\u202etxt\x7f\U000e0001"


def test_escape_unprintable_keeps_text_and_escapes_controls() -> None:
    assert escape_unprintable('plain "text" with \\ and é') == 'plain "text" with \\ and é'
    assert escape_unprintable("a\tb\nc\r") == "a\\tb\\nc\\r"
    escaped = escape_unprintable(HOSTILE)
    assert escaped.isprintable()
    assert escaped == ("\\x1b[2J\\x1b]0;owned\\x07\\x9b31m\\u202etxt\\x7f\\U000e0001")


def test_json_printable_is_the_same_json_value_without_raw_controls() -> None:
    document = {"value": HOSTILE + " é", "key": None}
    dumped = json_printable(json.dumps(document, ensure_ascii=False))
    assert dumped.isprintable()
    assert json.loads(dumped) == document
    assert "é" in dumped  # readable text stays as it is
    assert json_printable('{"a": "b"}') == '{"a": "b"}'


def test_dump_log_shows_control_characters_as_hex() -> None:
    assert show_bytes(b"\x1b[2J") == "0x1b5b324a"
    assert show_bytes(b'say "hi"\n') == '"say \\"hi\\"\\n"'

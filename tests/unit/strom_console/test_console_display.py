"""How the browser shows records: formats, truncation, bad UTF-8, timestamps."""

from __future__ import annotations

import pytest

from strom_console.messages import show_bytes, show_record, timestamp_text


def test_text_json_hex_base64() -> None:
    assert show_bytes(b"hello", "text", 100).text == "hello"
    assert show_bytes(b'{"a":[1,2]}', "json", 100).text == '{\n  "a": [\n    1,\n    2\n  ]\n}'
    assert show_bytes(b"\x00\xff", "hex", 100).text == "00 ff"
    assert show_bytes(b"hi", "base64", 100).text == "aGk="
    assert show_bytes(None, "text", 100).is_null


def test_not_json_falls_back_to_text_with_a_note() -> None:
    shown = show_bytes(b"plain", "json", 100)
    assert (shown.text, shown.note) == ("plain", "not JSON")


def test_bad_utf8_is_replaced_never_raised() -> None:
    shown = show_bytes(b"ok \xff\xfe end", "text", 100)
    assert shown.text == "ok \ufffd\ufffd end" and shown.note == "not UTF-8"


def test_a_huge_value_is_cut_to_the_limit() -> None:
    value = b"x" * (10 * 1024 * 1024)
    shown = show_bytes(value, "text", 4096)
    assert len(shown.text) == 4096 and shown.truncated and shown.size == len(value)
    assert len(show_bytes(value, "hex", 16).text) == 16 * 3 - 1
    cut_json = show_bytes(b'{"a": "' + b"y" * 100 + b'"}', "json", 20)
    assert cut_json.truncated and cut_json.note == "cut: not pretty-printed"


def test_a_character_cut_by_the_limit_is_not_called_bad_utf8() -> None:
    shown = show_bytes("ééé".encode(), "text", 3)  # cuts the second é in half
    assert (shown.text, shown.note) == ("é", "")


def test_unknown_format() -> None:
    with pytest.raises(ValueError, match="unknown format"):
        show_bytes(b"x", "yaml", 10)


def test_records_show_headers_as_text_unless_binary_formats() -> None:
    shown = show_record(
        partition=0, offset=1, timestamp=0, key=b"k", value=b"\x01", headers=(("h", b"v"),),
        fmt="hex", limit=10,
    )  # fmt: skip
    assert shown.value.text == "01" and shown.headers[0][1].text == "76"
    as_json = show_record(
        partition=0, offset=1, timestamp=0, key=b"k", value=b"{}", headers=(("h", None),),
        fmt="json", limit=10,
    )  # fmt: skip
    assert as_json.key.text == "k" and as_json.headers[0][1].is_null


def test_timestamps() -> None:
    assert timestamp_text(0) == "1970-01-01 00:00:00.000"
    assert timestamp_text(1700000000123) == "2023-11-14 22:13:20.123"
    assert timestamp_text(-1) == "-"

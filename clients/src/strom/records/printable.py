"""Showing arbitrary bytes safely: a record's key or value may hold anything, and the terminal
must never receive a raw control character (an escape sequence could rewrite the screen).
Shared by ``strom dump-log`` (quoted values) and ``strom consume`` (values as they are, only
the unprintable characters escaped)."""

from __future__ import annotations

__all__ = [
    "escape_unprintable",
    "json_bytes",
    "json_printable",
    "show_bytes",
    "show_key",
    "show_text",
]

_CONTROL_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_ESCAPES = {'"': '\\"', "\\": "\\\\", **_CONTROL_ESCAPES}
_PLAIN_KEY = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-:/")


def _unprintable(char: str) -> str:
    if char in _CONTROL_ESCAPES:
        return _CONTROL_ESCAPES[char]
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _escape(char: str) -> str:
    if char in _ESCAPES:
        return _ESCAPES[char]
    return char if char.isprintable() else _unprintable(char)


def show_text(text: str) -> str:
    """``text`` in double quotes with every non-printable character escaped (``\\n``,
    ``\\x1b``, ``\\u202e``, ...)."""
    return '"' + "".join(map(_escape, text)) + '"'


def escape_unprintable(text: str) -> str:
    """``text`` as it is but for its non-printable characters, escaped as ``show_text`` does
    (``\\n``, ``\\t``, ``\\x1b``, ``\\u202e``, ...); quotes and backslashes stay."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else _unprintable(c) for c in text)


def _json_escape(char: str) -> str:
    code = ord(char)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def json_printable(dumped: str) -> str:
    """A ``json.dumps(..., ensure_ascii=False)`` result with the non-printable characters JSON
    leaves raw (DEL, C1 controls such as CSI, bidirectional overrides) as ``\\u`` escapes:
    the same JSON value, safe on a terminal."""
    if dumped.isprintable():
        return dumped
    return "".join(c if c.isprintable() else _json_escape(c) for c in dumped)


def show_key(text: str) -> str:
    """A header key bare when it is plain (letters, digits, ``._-:/``), else quoted."""
    return text if text and set(text) <= _PLAIN_KEY else show_text(text)


def show_bytes(data: bytes | None) -> str:
    """``null``; printable UTF-8 (tabs and newlines allowed) as quoted, escaped text; anything
    else as ``0x`` and hex."""
    if data is None:
        return "null"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return "0x" + data.hex()
    if all(char.isprintable() or char in "\t\n\r" for char in text):
        return show_text(text)
    return "0x" + data.hex()


def json_bytes(data: bytes | None) -> str | dict[str, str] | None:
    """For ``--json``: null, the text when ``data`` is UTF-8 (JSON escapes it), else
    ``{"hex": ...}``."""
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return {"hex": data.hex()}

"""Showing arbitrary bytes safely: a record's key may hold anything, the terminal must never
receive a raw control character (an escape sequence could rewrite the screen)."""

from __future__ import annotations

__all__ = ["json_bytes", "show_bytes", "show_key", "show_text"]

_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_PLAIN_KEY = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-:/")


def _escape(char: str) -> str:
    if char in _ESCAPES:
        return _ESCAPES[char]
    if char.isprintable():
        return char
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def show_text(text: str) -> str:
    """``text`` in double quotes with every non-printable character escaped (``\\n``,
    ``\\x1b``, ``\\u202e``, ...)."""
    return '"' + "".join(map(_escape, text)) + '"'


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

"""How the message browser shows keys, values and headers: text, JSON, hex or base64.

Everything here works on bytes and returns plain strings; the templates escape them. A value
longer than the display limit is cut before it is formatted (a 10 MB value costs the page
``limit`` bytes), and bytes that are not UTF-8 are shown with replacement characters in text
mode, never raising.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from datetime import UTC, datetime

__all__ = ["FORMATS", "Shown", "ShownRecord", "show_bytes", "show_record", "timestamp_text"]

FORMATS = ("text", "json", "hex", "base64")


@dataclass(frozen=True, slots=True)
class Shown:
    """A key, value or header as displayed."""

    text: str
    size: int  # -1: null
    truncated: bool = False
    note: str = ""  # e.g. "not JSON", "not UTF-8"

    @property
    def is_null(self) -> bool:
        return self.size < 0


@dataclass(frozen=True, slots=True)
class ShownRecord:
    partition: int
    offset: int
    timestamp: int
    timestamp_text: str
    key: Shown
    value: Shown
    headers: tuple[tuple[str, Shown], ...]


def timestamp_text(ms: int) -> str:
    """``2026-11-26 10:00:00.123`` (UTC) for a timestamp in ms; ``-`` when there is none."""
    if ms < 0:
        return "-"
    try:
        moment = datetime.fromtimestamp(ms / 1000, UTC)
    except (OverflowError, OSError, ValueError):
        return str(ms)
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{ms % 1000:03d}"


def show_bytes(data: bytes | None, fmt: str, limit: int) -> Shown:
    """``data`` in ``fmt`` (one of ``FORMATS``), at most ``limit`` bytes of it."""
    if data is None:
        return Shown("null", -1)
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; one of {', '.join(FORMATS)}")
    size = len(data)
    truncated = size > limit
    head = bytes(data[:limit])
    if fmt == "hex":
        return Shown(head.hex(" "), size, truncated)
    if fmt == "base64":
        return Shown(base64.b64encode(head).decode("ascii"), size, truncated)
    if fmt == "json" and not truncated:
        try:
            parsed = json.loads(head)
        except (ValueError, UnicodeDecodeError):
            text, note = _text(head)
            return Shown(text, size, truncated, note or "not JSON")
        return Shown(json.dumps(parsed, indent=2, ensure_ascii=False), size)
    text, note = _text(head, cut=truncated)
    if fmt == "json":
        note = note or "cut: not pretty-printed"
    return Shown(text, size, truncated, note)


def _text(data: bytes, *, cut: bool = False) -> tuple[str, str]:
    try:
        return data.decode("utf-8"), ""
    except UnicodeDecodeError as exc:
        if cut and exc.start >= len(data) - 3 and exc.reason == "unexpected end of data":
            return data[: exc.start].decode("utf-8"), ""  # a character cut by the limit
        return data.decode("utf-8", errors="replace"), "not UTF-8"


def show_record(
    *,
    partition: int,
    offset: int,
    timestamp: int,
    key: bytes | None,
    value: bytes | None,
    headers: tuple[tuple[str, bytes | None], ...],
    fmt: str,
    limit: int,
) -> ShownRecord:
    """One record as the browser shows it (headers as text unless ``fmt`` is hex/base64)."""
    header_fmt = fmt if fmt in ("hex", "base64") else "text"
    return ShownRecord(
        partition=partition,
        offset=offset,
        timestamp=timestamp,
        timestamp_text=timestamp_text(timestamp),
        key=show_bytes(key, "text" if fmt == "json" else fmt, limit),
        value=show_bytes(value, fmt, limit),
        headers=tuple((name, show_bytes(v, header_fmt, limit)) for name, v in headers),
    )

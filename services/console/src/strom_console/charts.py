"""Inline SVG charts (no JavaScript library): a line of ``(t, value)`` samples."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

__all__ = ["LineChart", "line_chart"]


@dataclass(frozen=True, slots=True)
class LineChart:
    """What the template draws: the polyline's points and the axis labels."""

    width: int
    height: int
    points: str  # "x,y x,y ..." in SVG units, empty when there are no samples
    max_label: str
    start_label: str
    end_label: str
    samples: int


def _clock(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%H:%M:%S")


def line_chart(
    samples: Sequence[tuple[float, float]], width: int = 600, height: int = 160, pad: int = 4
) -> LineChart:
    """Scale ``samples`` into a ``width`` x ``height`` box (y grows downwards in SVG)."""
    if not samples:
        return LineChart(width, height, "", "0", "", "", 0)
    t0, t1 = samples[0][0], samples[-1][0]
    top = max(*(v for _, v in samples), 1)
    span = t1 - t0 or 1.0
    inner_w, inner_h = width - 2 * pad, height - 2 * pad
    points: list[str] = []
    for t, v in samples:
        x = pad + (t - t0) / span * inner_w if len(samples) > 1 else width / 2
        y = pad + inner_h - v / top * inner_h
        points.append(f"{x:.1f},{y:.1f}")
    if len(samples) == 1:  # a single sample still draws: a short flat segment
        x_text, y_text = points[0].split(",")
        middle = float(x_text)
        points = [f"{middle - 4:.1f},{y_text}", f"{middle + 4:.1f},{y_text}"]
    return LineChart(
        width, height, " ".join(points), f"{top:g}", _clock(t0), _clock(t1), len(samples)
    )

"""Entry point of the ``strom`` command."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    print("strom: not yet wired", file=sys.stderr)
    return 1

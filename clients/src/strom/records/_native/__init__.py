"""The optional C twin of the per-record codec (``_crecords``), loaded once at import.

``crecords`` is the extension module, or None when it was not built, failed to import, or
``STROM_NO_EXTENSIONS`` is set (to anything but ``""`` or ``"0"``); ``reason`` then says why.
"""

from __future__ import annotations

import os
from types import ModuleType

__all__ = ["crecords", "disabled_by_env", "reason"]

#: Whether STROM_NO_EXTENSIONS asks for the pure-Python codec.
disabled_by_env: bool = os.environ.get("STROM_NO_EXTENSIONS", "") not in ("", "0")

crecords: ModuleType | None = None
reason: str = ""

if disabled_by_env:
    reason = "disabled by STROM_NO_EXTENSIONS"
else:
    try:
        from strom.records._native import _crecords as crecords
    except ImportError as exc:  # not built (no compiler) or built for another interpreter
        reason = f"C extension unavailable: {exc}"

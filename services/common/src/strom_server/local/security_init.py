"""What ``strom cluster up --secure`` prepares, for clusters it does not start itself
(``docker compose -f docker-compose.secure.yml``, hand-run services): ``strom security init``
and ``strom security add-admin``.

``init_security(directory, services)`` writes the same files as ``--secure`` into
``directory``: ``tls/ca.crt`` (and its key), one certificate per service valid for the
service's own name (its host name in a compose network) as well as ``localhost``,
``127.0.0.1`` and ``::1``, and ``admin.properties`` with a random password. Existing files
are kept, so running it again changes nothing. ``add_admin`` stores the super user ``admin``
in etcd (through etcd's TLS client API, with the ``etcd`` certificate), waiting for etcd.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from strom_server.local import secure
from strom_server.security.certificates import LocalCa

__all__ = ["DEFAULT_SERVICES", "add_admin", "init_security"]

#: The processes of the default cluster (``strom cluster up``, docker-compose.yml).
DEFAULT_SERVICES = (
    "etcd", "controller-1", "controller-2", "storage-1", "storage-2", "storage-3", "gateway",
    "coordinator-1", "registry", "console",
)  # fmt: skip
_LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")


def init_security(directory: Path, services: Sequence[str] = DEFAULT_SERVICES) -> list[Path]:
    """The CA, the services' certificates and admin.properties (missing ones only); returns
    the files written."""
    names = list(dict.fromkeys(["etcd", *services]))  # the tools reach etcd with its one
    written: list[Path] = []
    ca = LocalCa(secure.tls_dir(directory))
    for name in names:
        if not name or "/" in name or name.startswith("."):
            raise ValueError(f"invalid service name {name!r}")
        if not (ca.directory / f"{name}.crt").exists():
            hosts = tuple(dict.fromkeys([name, *_LOCAL_HOSTS]))
            pair = ca.issue(name, hosts=hosts)
            written += [pair.certfile, pair.keyfile]
    properties = secure.admin_properties_path(directory)
    existed = properties.exists()
    secure.prepare_tls(directory, names)
    if not existed:
        written.append(properties)
    return written


def add_admin(
    directory: Path, etcd_endpoint: str, prefix: str = "/strom", timeout_s: float = 60.0
) -> None:
    """Store the super user (password from admin.properties) in etcd, retrying until etcd
    answers or ``timeout_s`` passes."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            secure.create_admin(directory, etcd_endpoint, prefix)
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(1.0)

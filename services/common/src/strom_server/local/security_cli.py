"""``strom security init|add-admin``: the files and the super user of ``strom cluster up
--secure`` for a cluster started some other way (docker-compose.secure.yml, hand-run
services). Registered with the ``strom`` command through the entry point ``security`` of the
group ``strom.cli_commands``; the work is done by ``strom_server.local.security_init``,
imported when a command runs.

``init --dir DIR [--services a,b,...]`` writes DIR/tls/ca.crt, a certificate per service
(valid for the service's name, localhost, 127.0.0.1 and ::1) and DIR/admin.properties;
``add-admin --dir DIR --etcd-endpoints HOST:PORT`` stores the user ``admin`` in etcd (over
TLS with DIR/tls/etcd.crt). Both keep what already exists.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

__all__ = ["add_parsers"]


def _init(args: argparse.Namespace) -> int:
    from strom_server.local import security_init as module

    services = [s.strip() for s in args.services.split(",") if s.strip()] or list(
        module.DEFAULT_SERVICES
    )
    try:
        written = module.init_security(args.dir.resolve(), services)
    except ValueError as exc:
        raise RuntimeError(f"--services: {exc}") from None
    for path in written:
        print(f"wrote {path}")
    if not written:
        print(f"{args.dir}: everything already there")
    return 0


def _add_admin(args: argparse.Namespace) -> int:
    directory = args.dir.resolve()
    if not (directory / "admin.properties").exists():
        raise RuntimeError(
            f"{directory}/admin.properties does not exist: run `strom security init`"
        )
    from strom_server.local import security_init

    security_init.add_admin(directory, args.etcd_endpoints, args.etcd_prefix, args.timeout)
    print(f"stored the super user admin (password in {directory / 'admin.properties'})")
    return 0


def add_parsers(commands: Any) -> None:
    """Add ``strom security init|add-admin`` to the ``strom`` command's subparsers ``commands``."""
    security = commands.add_parser(
        "security", help="certificates and the super user for a secure cluster (docs/security.md)"
    )
    actions = security.add_subparsers(dest="action", metavar="ACTION", required=True)
    init = actions.add_parser(
        "init", help="write a CA, the services' certificates and admin.properties into --dir"
    )
    init.add_argument("--dir", type=Path, required=True, help="where the files go")
    init.add_argument(
        "--services",
        default="",
        help="comma-separated service names, each a certificate valid for that host name "
        "(default: the processes of `strom cluster up`)",
    )
    init.set_defaults(handler=_init)
    admin = actions.add_parser(
        "add-admin", help="store the super user admin of --dir/admin.properties in etcd"
    )
    admin.add_argument("--dir", type=Path, required=True, help="what `init` wrote")
    admin.add_argument("--etcd-endpoints", required=True, help="etcd's client endpoint, host:port")
    admin.add_argument("--etcd-prefix", default="/strom", help="default: %(default)s")
    admin.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        help="seconds to wait for etcd (default: %(default)s)",
    )
    admin.set_defaults(handler=_add_admin)

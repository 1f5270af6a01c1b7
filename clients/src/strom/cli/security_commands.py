"""``strom users create|delete|list`` and ``strom acls add|remove|list``, and the
``--command-config FILE`` every ``strom`` command takes (docs/security.md).

``--command-config`` names a Kafka-style properties file (``security.protocol=SASL_SSL``,
``sasl.mechanism``, ``sasl.username``, ``sasl.password``, ``ssl.cafile``, ...); it may stand
anywhere on the command line, and every client the command creates connects with it. The ACL
flags are kafka-acls.sh's: ``--allow-principal``/``--deny-principal``, ``--operation``
(repeatable), ``--topic``/``--group``/``--cluster``/``--transactional-id``,
``--resource-pattern-type literal|prefixed``, ``--allow-host``/``--deny-host``.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
from collections.abc import Sequence
from typing import Any

from strom.admin import Admin
from strom.cli.bootstrap import add_bootstrap_option, default_bootstrap
from strom.cluster import parse_servers
from strom.cluster.login import client_security
from strom.errors import ConfigurationError
from strom.security import (
    SecurityConfig,
    command_config_options,
    set_default_security,
)
from strom.security.acl import WILDCARD, AclBinding, AclFilter
from strom.security.scram import DEFAULT_ITERATIONS

__all__ = ["add_parsers", "apply_command_config", "extract_command_config", "offer_everywhere"]

OPTION = "--command-config"


def extract_command_config(argv: Sequence[str]) -> tuple[list[str], str | None]:
    """``argv`` without ``--command-config FILE`` (or ``--command-config=FILE``), and FILE."""
    rest: list[str] = []
    found: str | None = None
    items = list(argv)
    index = 0
    while index < len(items):
        item = items[index]
        if item == OPTION:
            if index + 1 >= len(items):
                raise ConfigurationError(f"{OPTION} needs a file name")
            found = items[index + 1]
            index += 2
            continue
        if item.startswith(OPTION + "="):
            found = item.split("=", 1)[1]
        else:
            rest.append(item)
        index += 1
    return rest, found


def offer_everywhere(parser: argparse.ArgumentParser) -> None:
    """Show ``--command-config`` in the help of every command below ``parser`` (main()
    takes it from anywhere on the command line before parsing, so it is never parsed here)."""
    subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subparsers:
        if OPTION not in parser._option_string_actions:
            parser.add_argument(
                OPTION,
                metavar="FILE",
                default=argparse.SUPPRESS,
                help="security settings (Kafka-style properties file) for the command's clients",
            )
        return
    for child in subparsers[0].choices.values():
        offer_everywhere(child)


def apply_command_config(path: str, args: argparse.Namespace) -> None:
    """Make every client of this command use the security settings in ``path``."""
    config = SecurityConfig(**command_config_options(path))  # type: ignore[arg-type]
    bootstrap = getattr(args, "bootstrap_server", None) or default_bootstrap()
    set_default_security(client_security(config, parse_servers(bootstrap)))


def _admin(args: argparse.Namespace) -> Admin:
    return Admin(bootstrap_servers=args.bootstrap_server, request_timeout_ms=args.timeout_ms)


def _common(parser: argparse.ArgumentParser) -> None:
    add_bootstrap_option(parser)
    parser.add_argument(
        OPTION, metavar="FILE", help="properties file with the security settings (see above)"
    )
    parser.add_argument("--timeout-ms", type=int, default=30000, help="default: %(default)s")
    parser.add_argument("--json", action="store_true", help="print JSON")


def _resource_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--topic", help="a topic name (or * for every topic)")
    parser.add_argument("--group", help="a consumer group id (or *)")
    parser.add_argument("--transactional-id", help="a transactional id (or *)")
    parser.add_argument("--cluster", action="store_true", help="the cluster resource")
    parser.add_argument(
        "--resource-pattern-type",
        default=None,
        help="literal (default) or prefixed (matches every name starting with the given one)",
    )


def add_parsers(commands: Any) -> None:
    users = commands.add_parser("users", help="SCRAM users: create, delete, list")
    actions = users.add_subparsers(dest="action", metavar="ACTION", required=True)
    create = actions.add_parser("create", help="create a user or change its password")
    create.add_argument("name")
    create.add_argument(
        "--password", help="the password (default: asked for, or env STROM_USER_PASSWORD)"
    )
    create.add_argument("--mechanism", default="SCRAM-SHA-256", help="default: %(default)s")
    create.add_argument("--iterations", type=int, default=DEFAULT_ITERATIONS)
    _common(create)
    create.set_defaults(handler=_users_create)
    delete = actions.add_parser("delete", help="delete a user")
    delete.add_argument("name")
    delete.add_argument("--mechanism", default="", help="only this mechanism's credential")
    _common(delete)
    delete.set_defaults(handler=_users_delete)
    listing = actions.add_parser("list", help="list users and their mechanisms")
    _common(listing)
    listing.set_defaults(handler=_users_list)

    acls = commands.add_parser("acls", help="ACLs: add, remove, list (kafka-acls.sh's flags)")
    actions = acls.add_subparsers(dest="action", metavar="ACTION", required=True)
    for name, handler, text in (
        ("add", _acls_add, "add ACLs"),
        ("remove", _acls_remove, "remove the ACLs matching the flags"),
        ("list", _acls_list, "list the ACLs matching the flags"),
    ):
        sub = actions.add_parser(name, help=text)
        sub.add_argument("--allow-principal", action="append", default=[], metavar="User:NAME")
        sub.add_argument("--deny-principal", action="append", default=[], metavar="User:NAME")
        sub.add_argument("--principal", help="(list, remove) only this principal's ACLs")
        sub.add_argument("--allow-host", action="append", default=[], metavar="HOST")
        sub.add_argument("--deny-host", action="append", default=[], metavar="HOST")
        sub.add_argument(
            "--operation", action="append", default=[], help="Read, Write, Describe, ..., All"
        )
        _resource_flags(sub)
        _common(sub)
        sub.set_defaults(handler=handler)


# -- users ---------------------------------------------------------------------------------


def _users_create(args: argparse.Namespace) -> int:
    password = args.password or os.environ.get("STROM_USER_PASSWORD")
    if not password:
        password = getpass.getpass(f"password for {args.name}: ")
    if not password:
        raise ConfigurationError("the password is empty")
    with _admin(args) as admin:
        admin.upsert_scram_user(
            args.name, password, mechanism=args.mechanism, iterations=args.iterations
        )
    print(f"user {args.name} ({args.mechanism.upper()}) saved")
    return 0


def _users_delete(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        admin.delete_scram_user(args.name, mechanism=args.mechanism)
    print(f"user {args.name} deleted")
    return 0


def _users_list(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        users = admin.describe_scram_users()
    if args.json:
        listed = {
            user: [{"mechanism": m, "iterations": i} for m, i in credentials]
            for user, credentials in users.items()
        }
        print(json.dumps(listed))
        return 0
    for name, credentials in sorted(users.items()):
        print(f"{name}\t" + ", ".join(f"{m} ({i} iterations)" for m, i in credentials))
    return 0


# -- ACLs ----------------------------------------------------------------------------------


def _resources(args: argparse.Namespace, *, required: bool) -> list[tuple[str, str]]:
    found = []
    if args.topic:
        found.append(("TOPIC", args.topic))
    if args.group:
        found.append(("GROUP", args.group))
    if args.transactional_id:
        found.append(("TRANSACTIONAL_ID", args.transactional_id))
    if args.cluster:
        found.append(("CLUSTER", "kafka-cluster"))
    if required and not found:
        raise ConfigurationError(
            "name a resource: --topic, --group, --transactional-id or --cluster"
        )
    return found


def _bindings(args: argparse.Namespace) -> list[AclBinding]:
    if not args.operation:
        raise ConfigurationError("name at least one --operation")
    if not (args.allow_principal or args.deny_principal):
        raise ConfigurationError("name at least one --allow-principal or --deny-principal")
    pattern = args.resource_pattern_type or "LITERAL"
    bindings = []
    for rtype, name in _resources(args, required=True):
        for permission, principals, hosts in (
            ("ALLOW", args.allow_principal, args.allow_host or [WILDCARD]),
            ("DENY", args.deny_principal, args.deny_host or [WILDCARD]),
        ):
            for principal in principals:
                for host in hosts:
                    for operation in args.operation:
                        bindings.append(
                            AclBinding.create(
                                rtype,
                                name,
                                principal,
                                operation,
                                permission,
                                pattern_type=pattern,
                                host=host,
                            )
                        )
    return bindings


def _filters(args: argparse.Namespace) -> list[AclFilter]:
    principals = (
        [(p, "ALLOW") for p in args.allow_principal]
        + [(p, "DENY") for p in args.deny_principal]
        + ([(args.principal, "")] if args.principal else [])
    ) or [("", "")]
    resources = _resources(args, required=False) or [("", "")]
    operations = args.operation or [""]
    return [
        AclFilter.from_dict(
            {
                "resource_type": rtype,
                "resource_name": name,
                "pattern_type": args.resource_pattern_type or "",
                "principal": principal,
                "operation": operation,
                "permission_type": permission,
            }
        )
        for rtype, name in resources
        for principal, permission in principals
        for operation in operations
    ]


def _show(args: argparse.Namespace, acls: list[AclBinding]) -> None:
    if args.json:
        print(json.dumps([a.to_dict() for a in acls], indent=2))
        return
    for acl in acls:
        print(acl)


def _acls_add(args: argparse.Namespace) -> int:
    bindings = _bindings(args)
    with _admin(args) as admin:
        admin.create_acls(bindings)
    _show(args, bindings)
    return 0


def _acls_remove(args: argparse.Namespace) -> int:
    if not (args.topic or args.group or args.transactional_id or args.cluster or args.principal
            or args.allow_principal or args.deny_principal):  # fmt: skip
        raise ConfigurationError("refusing to remove every ACL: name a resource or a principal")
    removed: list[AclBinding] = []
    with _admin(args) as admin:
        for acl_filter in _filters(args):
            removed.extend(admin.delete_acls(acl_filter))
    _show(args, removed)
    if not args.json:
        print(f"{len(removed)} ACL(s) removed")
    return 0


def _acls_list(args: argparse.Namespace) -> int:
    found: dict[AclBinding, None] = {}
    with _admin(args) as admin:
        for acl_filter in _filters(args):
            found.update(dict.fromkeys(admin.describe_acls(acl_filter)))
    _show(args, list(found))
    return 0

"""Entry point of the ``strom`` command line.

Every command reports failure as one line on stderr and a non-zero exit status, never a
traceback (set STROM_DEBUG=1 to see one). Subcommands live in their own modules and register
themselves through ``add_parser``; the commands of the server distributions (``cluster``,
``security``, ``dump-log``) come from their entry points (``server_commands``).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping

from strom import __version__
from strom.cli import (
    admin_commands,
    console,
    groups,
    log_dirs,
    perf,
    schemas,
    security_commands,
    server_commands,
    transactions,
)
from strom.errors import StromError

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class CommandError(Exception):
    """A failure to report to the user as one line."""


def build_parser(
    servers: Mapping[str, server_commands.AddParsers] | None = None,
) -> argparse.ArgumentParser:
    """The ``strom`` command's parser; ``servers``: the server distributions' commands
    (default: those the installed distributions declare)."""
    if servers is None:
        servers = server_commands.installed()
    parser = argparse.ArgumentParser(
        prog="strom", description="Strom event streaming: run a local cluster and administer it."
    )
    parser.add_argument("--version", action="version", version=f"strom {__version__}")
    parser.add_argument(
        "--command-config",
        metavar="FILE",
        help="security settings for every client of the command: a Kafka-style properties "
        "file (security.protocol, sasl.mechanism, sasl.username, sasl.password, ssl.cafile); "
        "accepted anywhere on the command line",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    server_commands.add_command(commands, "cluster", servers)
    admin_commands.add_parsers(commands)
    console.add_parsers(commands)
    groups.add_parsers(commands)
    log_dirs.add_parsers(commands)
    transactions.add_parsers(commands)
    schemas.add_parsers(commands)
    security_commands.add_parsers(commands)
    server_commands.add_command(commands, "security", servers)
    perf.add_parser(commands)
    server_commands.add_command(commands, "dump-log", servers)
    for name in sorted(servers.keys() - server_commands.KNOWN.keys()):
        server_commands.add_command(commands, name, servers)
    security_commands.offer_everywhere(parser)
    return parser


def main(
    argv: list[str] | None = None,
    servers: Mapping[str, server_commands.AddParsers] | None = None,
) -> int:
    parser = build_parser(servers)
    arguments = sys.argv[1:] if argv is None else list(argv)
    try:
        arguments, command_config = security_commands.extract_command_config(arguments)
    except StromError as exc:
        parser.error(str(exc))
    args, unknown = parser.parse_known_args(arguments)
    if unknown and not getattr(args, "any_arguments", False):
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        if command_config:
            security_commands.apply_command_config(command_config, args)
        return int(args.handler(args) or 0)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except (CommandError, StromError, OSError, RuntimeError) as exc:
        if os.environ.get("STROM_DEBUG"):
            raise
        print(f"strom: error: {exc}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())

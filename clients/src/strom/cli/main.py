"""Entry point of the ``strom`` command line.

Every command reports failure as one line on stderr and a non-zero exit status, never a
traceback (set STROM_DEBUG=1 to see one). Subcommands live in their own modules and register
themselves through ``add_parser``.
"""

from __future__ import annotations

import argparse
import os
import sys

from strom import __version__
from strom.cli import (
    admin_commands,
    cluster,
    console,
    dump_log,
    groups,
    log_dirs,
    perf,
    schemas,
    security_commands,
    security_init,
    transactions,
)
from strom.errors import StromError

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class CommandError(Exception):
    """A failure to report to the user as one line."""


def build_parser() -> argparse.ArgumentParser:
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
    cluster.add_parser(commands)
    admin_commands.add_parsers(commands)
    console.add_parsers(commands)
    groups.add_parsers(commands)
    log_dirs.add_parsers(commands)
    transactions.add_parsers(commands)
    schemas.add_parsers(commands)
    security_commands.add_parsers(commands)
    security_init.add_parsers(commands)
    perf.add_parser(commands)
    dump_log.add_parser(commands)
    security_commands.offer_everywhere(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    arguments = sys.argv[1:] if argv is None else list(argv)
    try:
        arguments, command_config = security_commands.extract_command_config(arguments)
    except StromError as exc:
        parser.error(str(exc))
    args = parser.parse_args(arguments)
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

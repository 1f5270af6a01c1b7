"""``strom dump-log FILE...``: print and check a storage node's files (Kafka's kafka-dump-log).

A thin front over ``strom_storage.tools.dump_log`` (imported when the command runs, so
``strom`` starts as fast), registered with the ``strom`` command through the entry point
``dump-log`` of the group ``strom.cli_commands``. Usage and output: ``docs/dump-log.md``.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from pathlib import Path
from typing import Any

#: Exit status when the output pipe closes early (``strom dump-log ... | head``): 128 + SIGPIPE.
_EXIT_BROKEN_PIPE = 141


def add_parsers(commands: Any) -> None:
    """Add ``strom dump-log`` to the ``strom`` command's subparsers ``commands``."""
    parser = commands.add_parser(
        "dump-log",
        help=(
            "print and check storage files (.log, .index, .timeindex, .txnindex, .snapshot, "
            "checkpoints)"
        ),
        description=(
            "Print the contents of a storage node's partition files, read-only: record batches "
            "of .log segments, .index and .timeindex entries (checked against their .log), "
            "aborted transactions of .txnindex files, producer-state .snapshot files and "
            "checkpoint files. A torn or corrupt file is "
            "reported with the byte or entry where it breaks; the exit status is 1 when "
            "anything was found wrong."
        ),
    )
    parser.add_argument("files", nargs="+", type=Path, metavar="FILE", help="files to dump")
    parser.add_argument(
        "--print-data-log",
        action="store_true",
        help="also print every record: offset, timestamp, key, value, headers",
    )
    parser.add_argument(
        "--verify-index-only",
        action="store_true",
        help="check .index/.timeindex files against their .log and print only the mismatches "
        "(other files are skipped)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    parser.set_defaults(handler=dump_log_command)


def dump_log_command(args: argparse.Namespace) -> int:
    from strom_storage.tools import dump_log as tool

    options = tool.DumpOptions(
        print_data_log=args.print_data_log,
        verify_index_only=args.verify_index_only,
        json=args.json,
    )
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(errors="backslashreplace")  # a terminal that is not UTF-8
    try:
        status = int(tool.dump_files(args.files, options, sys.stdout))
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (| head): stop quietly, as cat does.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return _EXIT_BROKEN_PIPE
    return status

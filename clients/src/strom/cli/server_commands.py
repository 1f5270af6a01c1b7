"""The ``strom`` commands that live in server distributions, registered through entry points.

A server distribution declares each command it brings in the entry-point group
``strom.cli_commands`` of its pyproject.toml: the entry point's name is the command's, its
object a function ``add_parsers(commands)`` adding the command's argparse subparsers (as the
client's own command modules do), whose handlers import the server code when they run. So the
client distribution never imports server code, and ``strom`` finds the commands of whatever is
installed. A command of ``KNOWN`` whose distribution is not installed is still listed; running
it says, in one line, what to install.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from functools import partial
from importlib.metadata import entry_points
from typing import Any

__all__ = ["GROUP", "KNOWN", "AddParsers", "add_command", "installed"]

GROUP = "strom.cli_commands"

AddParsers = Callable[[Any], None]

#: The commands the server distributions bring, by name, and the distribution of each.
KNOWN: Mapping[str, str] = {
    "cluster": "strom-server",
    "security": "strom-server",
    "dump-log": "strom-storage",
}


def installed(group: str = GROUP) -> dict[str, AddParsers]:
    """The commands the installed distributions declare in ``group``: name -> add_parsers.

    An entry point whose module is gone (metadata left by a removed package) is skipped, as
    if its distribution were not installed.
    """
    found: dict[str, AddParsers] = {}
    for point in entry_points(group=group):
        if point.name in found:
            continue
        try:
            found[point.name] = point.load()
        except ModuleNotFoundError:
            continue
    return found


def add_command(commands: Any, name: str, found: Mapping[str, AddParsers]) -> None:
    """Add the command ``name`` to the subparsers ``commands``: its distribution's parsers, or
    (a ``KNOWN`` command not installed) one that takes any arguments and says what to install."""
    add = found.get(name)
    if add is not None:
        add(commands)
        return
    distribution = KNOWN[name]
    needs = (
        f"`strom {name}` needs the server package {distribution}: pip install {distribution} "
        "(or run `make up` in a Strom checkout)"
    )
    parser = commands.add_parser(name, help=f"(needs {distribution})", description=needs)
    parser.add_argument("arguments", nargs="*", help=argparse.SUPPRESS)
    parser.set_defaults(handler=partial(_not_installed, needs), any_arguments=True)


def _not_installed(needs: str, args: argparse.Namespace) -> int:
    raise RuntimeError(needs)

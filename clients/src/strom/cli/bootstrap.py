"""Where a ``strom`` command finds the cluster: ``--bootstrap-server``, else the environment's
``STROM_BOOTSTRAP_SERVERS``, else the clients' default
(``strom.cluster.DEFAULT_BOOTSTRAP_SERVERS``); one declaration for every command."""

from __future__ import annotations

import argparse
import os

from strom.cluster import DEFAULT_BOOTSTRAP_SERVERS

__all__ = ["ENV", "add_bootstrap_option", "default_bootstrap"]

ENV = "STROM_BOOTSTRAP_SERVERS"


def default_bootstrap() -> str:
    """The bootstrap servers a command uses when ``--bootstrap-server`` is not given."""
    return os.environ.get(ENV, DEFAULT_BOOTSTRAP_SERVERS)


def add_bootstrap_option(parser: argparse.ArgumentParser, *, resolved: bool = True) -> None:
    """``--bootstrap-server``; ``resolved=False`` leaves it None when not given (a command
    that looks in its properties first, then calls ``default_bootstrap()``)."""
    parser.add_argument(
        "--bootstrap-server",
        default=default_bootstrap() if resolved else None,
        help=f"gateway address (env {ENV}; default: {default_bootstrap()})",
    )

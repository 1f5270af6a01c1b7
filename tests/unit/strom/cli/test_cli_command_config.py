"""Every ``strom`` command takes ``--command-config FILE``: each leaf of the parser tree shows
it, and it is applied (a bad file is the command's one-line error, naming the file) before the
command runs, wherever it stands on the command line."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from strom.cli.main import build_parser, main


def _leaves(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[tuple]:
    subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subparsers:
        return [(path, parser)]
    found = []
    for name, child in subparsers[0].choices.items():
        found += _leaves(child, (*path, name))
    return found


def test_every_command_offers_command_config() -> None:
    leaves = _leaves(build_parser())
    names = {" ".join(path) for path, _ in leaves}
    assert {"users create", "acls add", "transactions list", "schemas list", "cluster status",
            "topics list", "perf produce", "groups describe"} <= names  # fmt: skip
    missing = [
        " ".join(path)
        for path, parser in leaves
        if "--command-config" not in parser._option_string_actions
        or "--command-config" not in parser.format_help()
    ]
    assert not missing, f"no --command-config on: {missing}"


@pytest.mark.parametrize(
    "argv",
    [
        ["topics", "list", "--command-config", "{file}"],
        ["--command-config={file}", "groups", "list"],
        ["transactions", "list", "--command-config", "{file}"],
        ["users", "list", "--command-config", "{file}"],
        ["cluster", "status", "--command-config", "{file}"],
    ],
)
def test_the_file_is_applied_before_the_command_runs(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "client.properties"
    bad.write_text("security.protocol=CARRIER_PIGEON\n")
    assert main([a.replace("{file}", str(bad)) for a in argv]) == 1
    error = capsys.readouterr().err.strip()
    assert error.startswith("strom: error: ") and str(bad) in error, error
    assert "CARRIER_PIGEON" in error, error

"""The ``strom`` commands of the server distributions come from their entry points (group
``strom.cli_commands``): a distribution's declared command is on the command line, the
repository's server distributions declare exactly the commands the client knows, and a known
command whose distribution is not installed still answers with one line saying what to
install."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from importlib import import_module
from pathlib import Path

import pytest

from strom.cli import server_commands
from strom.cli.main import build_parser, main

REPO = Path(__file__).resolve().parents[4]


def _declared() -> dict[str, tuple[str, str]]:
    """command -> (distribution, object reference), from every pyproject.toml."""
    found: dict[str, tuple[str, str]] = {}
    for pyproject in sorted(REPO.glob("*/pyproject.toml")) + sorted(
        REPO.glob("services/*/pyproject.toml")
    ):
        project = tomllib.loads(pyproject.read_text())["project"]
        points = project.get("entry-points", {}).get(server_commands.GROUP, {})
        for name, target in points.items():
            assert name not in found, f"{name} declared twice ({pyproject})"
            found[name] = (project["name"], target)
    return found


def test_the_server_distributions_declare_the_commands_the_client_knows() -> None:
    declared = _declared()
    assert {name: dist for name, (dist, _) in declared.items()} == dict(server_commands.KNOWN)
    for name, (_, target) in declared.items():
        module, _, attribute = target.partition(":")
        add = getattr(import_module(module), attribute)
        assert callable(add), target
        assert not module.startswith("strom."), f"{name}: server code, not the client's"


def test_an_installed_distribution_s_command_is_on_the_command_line(tmp_path: Path) -> None:
    """A distribution (metadata and module in a folder of its own on sys.path) declaring a
    command in the group: ``strom`` parses and runs it."""
    (tmp_path / "strom_hello_cli.py").write_text(
        "def add_parsers(commands):\n"
        "    hello = commands.add_parser('hello', help='say hello')\n"
        "    hello.add_argument('--name', default='world')\n"
        "    hello.set_defaults(handler=lambda args: print(f'hello {args.name}'))\n"
    )
    info = tmp_path / "strom_hello-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: strom-hello\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text(
        f"[{server_commands.GROUP}]\nhello = strom_hello_cli:add_parsers\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    run = "import sys; from strom.cli.main import main; sys.exit(main(sys.argv[1:]))"
    result = subprocess.run(
        [sys.executable, "-c", run, "hello", "--name", "strom"],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert (result.returncode, result.stdout, result.stderr) == (0, "hello strom\n", "")
    listed = subprocess.run(
        [sys.executable, "-c", run, "--help"], capture_output=True, text=True, env=env, timeout=60
    )
    assert "say hello" in listed.stdout, listed.stdout


@pytest.mark.parametrize(
    ("argv", "distribution"),
    [
        (["cluster", "up", "--data-dir", "x"], "strom-server"),
        (["cluster", "status", "--json"], "strom-server"),
        (["security", "init", "--dir", "x"], "strom-server"),
        (["dump-log", "--json", "00000000000000000000.log"], "strom-storage"),
    ],
)
def test_a_command_whose_distribution_is_missing_says_what_to_install(
    argv: list[str], distribution: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv, servers={}) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        f"strom: error: `strom {argv[0]}` needs the server package {distribution}: "
        f"pip install {distribution} (or run `make up` in a Strom checkout)\n"
    )


def test_missing_commands_are_still_listed_and_other_commands_still_check_arguments(
    capsys: pytest.CaptureFixture[str],
) -> None:
    listing = build_parser(servers={}).format_help()
    assert "(needs strom-server)" in listing and "(needs strom-storage)" in listing
    with pytest.raises(SystemExit) as exit_info:
        main(["topics", "list", "--no-such-flag"], servers={})
    assert exit_info.value.code == 2
    assert "unrecognized arguments: --no-such-flag" in capsys.readouterr().err

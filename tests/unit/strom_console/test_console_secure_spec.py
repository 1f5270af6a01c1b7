"""``strom cluster up --secure`` starts the console as the super user behind the admin's login:
the admin's client settings, user ``admin`` and a password file (owner-only) holding the
admin's password, and the registry's https URL; and a console given secure settings without a
login refuses to start."""

from __future__ import annotations

import stat
from pathlib import Path

from strom_testkit import free_port

from strom.cli.main import build_parser
from strom_console.__main__ import main
from strom_server.local import cluster as local
from strom_server.local import secure
from strom_server.local.cluster_cli import _spec


def test_the_secure_console_process(tmp_path: Path) -> None:
    spec = local.LocalClusterSpec(tmp_path, console_port=free_port(), registry_port=free_port(),
                                  secure=True)  # fmt: skip
    argv = list(spec._console().argv)  # the console alone: no certificate for each service
    assert argv[argv.index("--command-config") + 1] == str(secure.admin_properties_path(tmp_path))
    assert argv[argv.index("--user") + 1] == secure.ADMIN_USER
    password_file = Path(argv[argv.index("--password-file") + 1])
    assert password_file.read_text() == secure.admin_options(tmp_path)["sasl_plain_password"]
    assert stat.S_IMODE(password_file.stat().st_mode) == 0o600
    # The schemas pages reach the (https) registry as the same user.
    assert argv[argv.index("--schema-registry-url") + 1] == spec.registry_url
    assert spec.registry_url.startswith("https://")


def test_cluster_up_secure_keeps_the_console(tmp_path: Path) -> None:
    args = build_parser().parse_args(
        ["cluster", "up", "--secure", "--data-dir", str(tmp_path), "--console-port", "18080"]
    )
    assert _spec(args, local).console_port == 18080


def test_secure_settings_without_a_login_are_refused(tmp_path: Path, capsys: object) -> None:
    properties = tmp_path / "client.properties"
    properties.write_text("security.protocol=SASL_SSL\nsasl.username=u\nsasl.password=p\n")
    assert main(["--command-config", str(properties)]) == 2
    assert main(["--command-config", str(tmp_path / "missing.properties")]) == 2
    properties.write_text("security.protocol=SMOKE_SIGNALS\n")
    assert main(["--command-config", str(properties), "--user", "ops"]) == 2
    err = capsys.readouterr().err  # type: ignore[attr-defined]
    assert "set --user and --password-file" in err
    assert "missing.properties" in err and "SMOKE_SIGNALS" in err

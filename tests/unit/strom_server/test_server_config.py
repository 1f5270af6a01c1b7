"""Settings: typed parsing, precedence default < file < env < flag, and every rejection."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from strom.errors import ConfigurationError
from strom_server.runtime.config import (
    InvalidSettingError,
    ServerConfig,
    config_items,
    load_config,
    override,
    setting,
    settings_of,
)
from strom_server.runtime.values import (
    ByteSize,
    GiB,
    HostPort,
    KiB,
    MiB,
    format_byte_size,
    parse_byte_size,
    split_endpoint,
    split_host_port,
)


@dataclass(frozen=True, kw_only=True)
class NodeConfig(ServerConfig):
    """A service's config: extends the common one, overrides a default, adds its own."""

    listen: HostPort = override(ServerConfig, "listen", "127.0.0.1:9093")
    node_id: int = setting(1, help="this node's id", min=0, max=1000)
    log_dirs: tuple[str, ...] = setting(("data",), help="log directories")
    segment_bytes: ByteSize = setting(
        ByteSize(1 * GiB), name="segment.bytes", min=14, help="segment size"
    )
    compact: bool = setting(False, help="compact logs")


def write_toml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "strom.toml"
    path.write_text(text)
    return path


def test_defaults_without_any_source() -> None:
    config = load_config(ServerConfig, [], {})
    assert config == ServerConfig()
    assert config.listen == "127.0.0.1:0"
    assert config.etcd_endpoints == ("127.0.0.1:2379",)
    assert config.etcd_prefix == "/strom"
    assert (config.log_level, config.log_format) == ("info", "json")
    assert config.metrics_listen == "0" and config.otlp_endpoint == ""
    assert config.max_message_size == 64 * MiB
    assert config.shutdown_grace == 10.0


def test_names_env_vars_and_flags_derive_from_fields() -> None:
    by_field = {spec.field: spec for spec in settings_of(NodeConfig)}
    assert by_field["etcd_endpoints"].env == "STROM_ETCD_ENDPOINTS"
    assert by_field["etcd_endpoints"].flags == ("--etcd-endpoints",)
    assert by_field["segment_bytes"].name == "segment.bytes"
    assert by_field["segment_bytes"].env == "STROM_SEGMENT_BYTES"
    assert by_field["segment_bytes"].flags == ("--segment.bytes", "--segment-bytes")


def test_each_source_overrides_the_one_below(tmp_path: Path) -> None:
    path = write_toml(tmp_path, 'node_id = 2\nlisten = "127.0.0.1:7000"\nlog_level = "error"\n')
    env = {"STROM_NODE_ID": "3", "STROM_LISTEN": "127.0.0.1:8000"}
    argv = ["--config", str(path), "--node-id", "4"]
    config = load_config(NodeConfig, argv, env)
    assert config.node_id == 4  # flag beats env, file and default
    assert config.listen == "127.0.0.1:8000"  # env beats file and default
    assert config.log_level == "error"  # file beats default
    assert config.shutdown_grace == 10.0  # default
    assert load_config(NodeConfig, [], {}).listen == "127.0.0.1:9093"  # overridden default


def test_config_file_from_env_var_and_flag_wins(tmp_path: Path) -> None:
    from_env = tmp_path / "env.toml"
    from_env.write_text("node_id = 5\n")
    from_flag = tmp_path / "flag.toml"
    from_flag.write_text("node_id = 6\n")
    assert load_config(NodeConfig, [], {"STROM_CONFIG": str(from_env)}).node_id == 5
    config = load_config(NodeConfig, ["--config", str(from_flag)], {"STROM_CONFIG": str(from_env)})
    assert config.node_id == 6


def test_toml_accepts_dashes_underscores_tables_and_dotted_names(tmp_path: Path) -> None:
    path = write_toml(
        tmp_path,
        "\n".join(
            [
                'max-message-size = "1MiB"',
                "shutdown_grace = 3",
                "segment.bytes = 1048576",
                "compact = true",
                'log_dirs = ["/a", "/b"]',
                "[etcd]",
                'endpoints = ["10.0.0.1:2379", "http://10.0.0.2:2379"]',
                'prefix = "/strom-test"',
            ]
        ),
    )
    config = load_config(NodeConfig, ["--config", str(path)], {})
    assert config.max_message_size == MiB
    assert config.shutdown_grace == 3.0 and isinstance(config.shutdown_grace, float)
    assert config.segment_bytes == MiB
    assert config.compact is True
    assert config.log_dirs == ("/a", "/b")
    path.write_text('log_dirs = ["/data/a,b"]\n')  # array items are taken whole
    assert load_config(NodeConfig, ["--config", str(path)], {}).log_dirs == ("/data/a,b",)
    assert config.etcd_endpoints == ("10.0.0.1:2379", "http://10.0.0.2:2379")
    assert config.etcd_prefix == "/strom-test"


def test_typed_parsing_from_env_and_flags() -> None:
    env = {
        "STROM_ETCD_ENDPOINTS": " a:1, b:2 ,",
        "STROM_COMPACT": "yes",
        "STROM_SEGMENT_BYTES": "64 MiB",
        "STROM_LOG_LEVEL": "DEBUG",
    }
    config = load_config(NodeConfig, ["--log-dirs", "/x,/y", "--log-dirs", "/z"], env)
    assert config.etcd_endpoints == ("a:1", "b:2")
    assert config.compact is True
    assert config.segment_bytes == 64 * MiB
    assert config.log_level == "debug"  # choices match case-insensitively, stored canonical
    assert config.log_dirs == ("/x", "/y", "/z")  # repeated list flags add up
    assert load_config(NodeConfig, ["--no-compact"], env).compact is False
    assert load_config(NodeConfig, ["--segment-bytes", "2KiB"], env).segment_bytes == 2 * KiB


def test_config_items_uses_setting_names() -> None:
    items = config_items(load_config(NodeConfig, [], {}))
    assert items["segment.bytes"] == GiB
    assert items["etcd-endpoints"] == ("127.0.0.1:2379",)


@pytest.mark.parametrize(
    ("argv", "env", "option", "source", "value"),
    [
        (["--node-id", "seven"], {}, "node-id", "flag --node-id", "seven"),
        (["--node-id", "1001"], {}, "node-id", "flag --node-id", "1001"),
        (["--shutdown-grace", "-1"], {}, "shutdown-grace", "flag --shutdown-grace", "-1"),
        (["--shutdown-grace", "nan"], {}, "shutdown-grace", "flag --shutdown-grace", "nan"),
        (["--log-format", "xml"], {}, "log-format", "flag --log-format", "xml"),
        (["--listen", "localhost"], {}, "listen", "flag --listen", "localhost"),
        (["--listen", "h:70000"], {}, "listen", "flag --listen", "h:70000"),
        (
            [],
            {"STROM_MAX_MESSAGE_SIZE": "64XB"},
            "max-message-size",
            "STROM_MAX_MESSAGE_SIZE",
            "64XB",
        ),
        (
            [],
            {"STROM_MAX_MESSAGE_SIZE": "512"},
            "max-message-size",
            "STROM_MAX_MESSAGE_SIZE",
            "512",
        ),
        ([], {"STROM_COMPACT": "maybe"}, "compact", "environment variable STROM_COMPACT", "maybe"),
        ([], {"STROM_ETCD_PREFIX": "strom/"}, "etcd-prefix", "STROM_ETCD_PREFIX", "strom/"),
        ([], {"STROM_ETCD_ENDPOINTS": "a:1,b"}, "etcd-endpoints", "STROM_ETCD_ENDPOINTS", "a:1,b"),
        ([], {"STROM_METRICS_LISTEN": "x:y"}, "metrics-listen", "STROM_METRICS_LISTEN", "x:y"),
        (
            [],
            {"STROM_OTLP_ENDPOINT": "collector"},
            "otlp-endpoint",
            "STROM_OTLP_ENDPOINT",
            "collector",
        ),
        ([], {"STROM_SEGMENT_BYTES": "1.5"}, "segment.bytes", "STROM_SEGMENT_BYTES", "1.5"),
    ],
)
def test_bad_flag_or_env_value_names_option_source_and_value(
    argv: list[str], env: dict[str, str], option: str, source: str, value: str
) -> None:
    with pytest.raises(InvalidSettingError) as caught:
        load_config(NodeConfig, argv, env)
    message = str(caught.value)
    assert f"'{option}'" in message and source in message and repr(value) in message
    assert caught.value.option == option
    assert isinstance(caught.value, ConfigurationError)


@pytest.mark.parametrize(
    ("toml", "option", "value"),
    [
        ('node_id = "two"', "node-id", "'two'"),
        ("node_id = 2.5", "node-id", "2.5"),
        ("node_id = true", "node-id", "True"),
        ("listen = 9092", "listen", "9092"),
        ("compact = 1", "compact", "1"),
        ('log_dirs = "a,b"\nsegment-bytes = -1', "segment.bytes", "-1"),
        ("log_dirs = [1, 2]", "log-dirs", "[1, 2]"),
        ("shutdown_grace = 4000", "shutdown-grace", "4000"),
    ],
)
def test_bad_file_value_names_option_file_and_value(
    tmp_path: Path, toml: str, option: str, value: str
) -> None:
    path = write_toml(tmp_path, toml)
    with pytest.raises(InvalidSettingError) as caught:
        load_config(NodeConfig, ["--config", str(path)], {})
    message = str(caught.value)
    assert f"'{option}'" in message and f"config file {path}" in message and value in message


def test_unknown_file_key_is_rejected_with_a_suggestion(tmp_path: Path) -> None:
    path = write_toml(tmp_path, "node_id = 2\nlisen = '127.0.0.1:1'\n")
    with pytest.raises(
        ConfigurationError, match=r"unknown setting 'lisen' \(did you mean 'listen'"
    ):
        load_config(NodeConfig, ["--config", str(path)], {})
    path = write_toml(tmp_path, "[etcd]\nendpoint = ['a:1']\n")
    with pytest.raises(ConfigurationError, match=r"unknown setting 'etcd\.endpoint'"):
        load_config(NodeConfig, ["--config", str(path)], {})


def test_same_setting_twice_in_file_is_rejected(tmp_path: Path) -> None:
    path = write_toml(tmp_path, "etcd-prefix = '/a'\n[etcd]\nprefix = '/b'\n")
    with pytest.raises(ConfigurationError, match="'etcd-prefix' is given twice"):
        load_config(NodeConfig, ["--config", str(path)], {})


def test_missing_or_malformed_file_is_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="cannot read it"):
        load_config(NodeConfig, ["--config", str(tmp_path / "absent.toml")], {})
    path = write_toml(tmp_path, "node_id = = 3")
    with pytest.raises(ConfigurationError, match="not valid TOML"):
        load_config(NodeConfig, ["--config", str(path)], {})


def test_unknown_flags_and_missing_flag_values_are_configuration_errors() -> None:
    with pytest.raises(ConfigurationError, match=r"unknown argument.*--nodeid"):
        load_config(NodeConfig, ["--nodeid", "3"], {})
    with pytest.raises(ConfigurationError, match=r"unknown argument.*--lis"):
        load_config(NodeConfig, ["--lis", "a:1"], {})  # no abbreviations
    with pytest.raises(ConfigurationError, match="--node-id"):
        load_config(NodeConfig, ["--node-id"], {})


def test_unrelated_env_vars_are_ignored() -> None:
    env = {"STROM_ETCD_BINARY": "/usr/bin/etcd", "STROM_SOMETHING_ELSE": "x", "PATH": "/bin"}
    assert load_config(NodeConfig, [], env) == NodeConfig()


def test_bad_built_in_default_is_reported_as_such() -> None:
    @dataclass(frozen=True, kw_only=True)
    class Broken(ServerConfig):
        workers: int = setting(0, help="workers", min=1)

    with pytest.raises(InvalidSettingError, match="built-in default of Broken"):
        load_config(Broken, [], {})


def test_declaration_mistakes_fail_loudly() -> None:
    @dataclass(frozen=True, kw_only=True)
    class Plain(ServerConfig):
        note: str = "x"

    with pytest.raises(TypeError, match=r"Plain\.note must be declared with setting\(\)"):
        settings_of(Plain)

    @dataclass(frozen=True, kw_only=True)
    class Unsupported(ServerConfig):
        ratio: complex = setting(1j, help="?")

    with pytest.raises(TypeError, match="unsupported setting type"):
        settings_of(Unsupported)
    with pytest.raises(TypeError, match="no setting named 'nope'"):
        override(ServerConfig, "nope", 1)


def test_help_lists_settings_defaults_and_env_vars(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        load_config(NodeConfig, ["--help"], {}, prog="strom-node")
    assert caught.value.code == 0
    out = capsys.readouterr().out
    assert "strom-node" in out and "--etcd-endpoints" in out and "STROM_SEGMENT_BYTES" in out
    assert "default: 1GiB" in out and "--no-compact" in out


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", 0),
        ("65536", 65536),
        ("64KiB", 64 * KiB),
        ("64 mib", 64 * MiB),
        ("1.5GiB", 3 * GiB // 2),
        ("2KB", 2000),
        ("1GB", 10**9),
        ("3B", 3),
    ],
)
def test_byte_sizes(text: str, expected: int) -> None:
    assert parse_byte_size(text) == expected


@pytest.mark.parametrize("text", ["", "MiB", "-1", "1.3B", "12 parsecs", "1e6"])
def test_bad_byte_sizes(text: str) -> None:
    with pytest.raises(ValueError, match="byte size"):
        parse_byte_size(text)


def test_format_byte_size_round_trips() -> None:
    for size in (0, 1, 1000, KiB, 64 * MiB, 3 * GiB, 1536):
        assert parse_byte_size(format_byte_size(size)) == size
    assert format_byte_size(64 * MiB) == "64MiB"


def test_host_port_forms() -> None:
    assert split_host_port("127.0.0.1:9092") == ("127.0.0.1", 9092)
    assert split_host_port("[::1]:0") == ("::1", 0)
    assert split_host_port(":9092") == ("", 9092)
    assert split_endpoint("http://etcd:2379/") == ("etcd", 2379)
    for bad in ("9092", "a:b", "::1:9092", "http://a:1", "a b:1", "[::1]9092"):
        with pytest.raises(ValueError):
            split_host_port(bad)

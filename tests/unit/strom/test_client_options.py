"""Each client option is declared once, in its client's config dataclass: the constructors'
parameters, the ``*Options`` TypedDicts and the option tables of docs/clients.md are checked
against those declarations (names, types, defaults)."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
import textwrap
import typing
from pathlib import Path
from typing import Any

import pytest

import strom
import strom.aio
from strom.admin import AdminConfig, AdminOptions
from strom.consumer import ConsumerConfig, ConsumerOptions
from strom.producer import ProducerConfig, ProducerOptions

DOCS = Path(__file__).resolve().parents[3] / "docs" / "clients.md"
MiB = 1024 * 1024


class Client(typing.NamedTuple):
    name: str
    config: type[Any]
    options: type[Any]
    constructors: tuple[type[Any], ...]
    docs_section: str


CLIENTS = [
    Client(
        "producer",
        ProducerConfig,
        ProducerOptions,
        (strom.Producer, strom.aio.Producer),
        "Producer",
    ),
    Client(
        "consumer",
        ConsumerConfig,
        ConsumerOptions,
        (strom.Consumer, strom.aio.Consumer),
        "Consumer",
    ),
    Client("admin", AdminConfig, AdminOptions, (strom.Admin, strom.aio.Admin), "Admin"),
]
IDS = [c.name for c in CLIENTS]


def _fields(config: type[Any]) -> dict[str, dataclasses.Field[Any]]:
    return {f.name: f for f in dataclasses.fields(config)}


def _named_parameters(cls: type[Any]) -> dict[str, inspect.Parameter]:
    """The constructor's parameters that are options: neither self, *topics nor **options."""
    parameters = inspect.signature(cls.__init__).parameters.values()
    return {
        p.name: p
        for p in parameters
        if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    }


@pytest.mark.parametrize("client", CLIENTS, ids=IDS)
def test_the_options_typeddict_has_the_config_fields_with_their_types(client: Client) -> None:
    fields = typing.get_type_hints(client.config)
    options = typing.get_type_hints(client.options)
    assert client.options.__total__ is False
    for cls in client.constructors:
        named = _named_parameters(cls)
        assert not set(named) & set(options), cls
        # Same names; the order is the config's inheritance (shared ClientConfig fields
        # first), which a constructor's named parameters need not follow.
        assert sorted([*named, *options]) == sorted(fields), cls
    assert options == {name: fields[name] for name in options}


@pytest.mark.parametrize("client", CLIENTS, ids=IDS)
def test_both_constructors_pass_every_option_through(client: Client) -> None:
    """Named parameters carry the config field's type and default; the rest arrive as
    ``**options: Unpack[<Client>Options]``."""
    fields = _fields(client.config)
    hints = typing.get_type_hints(client.config)
    for cls in client.constructors:
        init_hints = typing.get_type_hints(cls.__init__)
        for name, parameter in _named_parameters(cls).items():
            assert parameter.default == fields[name].default, (cls, name)
            assert init_hints[name] == hints[name], (cls, name)
        unpacked = init_hints["options"]
        assert typing.get_origin(unpacked) is typing.Unpack, cls
        assert typing.get_args(unpacked) == (client.options,), cls


@pytest.mark.parametrize("client", CLIENTS, ids=IDS)
def test_every_option_has_a_default_and_a_docstring(client: Client) -> None:
    documented = set()
    # The config's own fields and those it inherits (the shared ClientConfig, SecurityConfig).
    for cls in client.config.__mro__:
        if not dataclasses.is_dataclass(cls):
            continue
        body = ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0]
        assert isinstance(body, ast.ClassDef)
        for statement, after in zip(body.body, body.body[1:], strict=False):
            if (
                isinstance(statement, ast.AnnAssign)
                and isinstance(statement.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                documented.add(statement.target.id)
    fields = _fields(client.config)
    assert documented == set(fields)
    assert all(f.default is not dataclasses.MISSING for f in fields.values())


@pytest.mark.parametrize("client", CLIENTS, ids=IDS)
def test_each_client_keeps_its_checked_config(client: Client) -> None:
    assert client.config().bootstrap_servers == ["localhost:9092"]
    for cls in client.constructors:
        made = cls(bootstrap_servers="127.0.0.1:1, 127.0.0.1:2", client_id="probe")
        try:
            assert isinstance(made.config, client.config)
            assert made.config.bootstrap_servers == ["127.0.0.1:1", "127.0.0.1:2"]
            assert made.config.client_id == "probe"
        finally:
            if isinstance(made, strom.Producer | strom.Consumer | strom.Admin):
                made.close()


def _options_table(section: str) -> list[tuple[list[str], list[str]]]:
    """(names, defaults) of each row of the "### Options" table under ``## <section>``, the
    backquoted words of the first two columns."""
    text = DOCS.read_text()
    start = text.index(f"\n## {section}\n")
    end = text.find("\n## ", start + 1)
    part = text[start : end if end >= 0 else len(text)]
    table = part[part.index("\n### Options\n") :]
    rows = []
    for line in table.splitlines():
        if not line.startswith("| `"):
            if rows and not line.startswith("|"):
                break
            continue
        cells = [cell.strip() for cell in line.strip("|").split(" | ")]
        rows.append((re.findall(r"`([^`]*)`", cells[0]), re.findall(r"`([^`]*)`", cells[1])))
    return rows


def _value(text: str) -> object:
    size = re.fullmatch(r"(\d+) MiB", text)
    return int(size.group(1)) * MiB if size else ast.literal_eval(text)


@pytest.mark.parametrize("client", CLIENTS, ids=IDS)
def test_the_docs_table_names_every_option_with_its_default(client: Client) -> None:
    fields = _fields(client.config)
    documented: dict[str, object] = {}
    for names, defaults in _options_table(client.docs_section):
        if names[0].startswith("*"):  # positional arguments: not options
            for cls in client.constructors:
                parameter = inspect.signature(cls).parameters[names[0][1:]]
                assert parameter.kind is parameter.VAR_POSITIONAL, cls
            continue
        assert len(defaults) in (1, len(names)), names
        for i, name in enumerate(names):
            documented[name] = _value(defaults[i if len(defaults) > 1 else 0])
    assert sorted(documented) == sorted(fields), "documented options differ from the config"
    assert documented == {name: field.default for name, field in fields.items()}

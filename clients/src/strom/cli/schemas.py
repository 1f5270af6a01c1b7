"""``strom schemas register|list|get|check|delete``: a schema registry from the command line
(Strom's, or any Confluent-compatible one).

The registry is ``--registry-url`` (env ``STROM_SCHEMA_REGISTRY_URL``, default
http://127.0.0.1:8081); a secured one takes ``--registry-user-info USER:PASSWORD`` and
``--registry-cafile FILE``. A schema comes from ``--schema FILE`` (``-`` for stdin) or
``--schema-text``; its type from ``--type`` (AVRO, JSON, PROTOBUF; default AVRO, or PROTOBUF
for a ``.proto`` file, JSON for a ``.json`` file that is not Avro). ``check`` exits 1 when the
schema is incompatible. Output is a table, or JSON with ``--json``. See
docs/schema-registry.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from strom.cli.groups import _emit, _table
from strom.errors import ConfigurationError
from strom.serde.registry_client import SchemaReference, SchemaRegistryClient

DEFAULT_REGISTRY_URL = "http://127.0.0.1:8081"
_TYPES = ("AVRO", "JSON", "PROTOBUF")


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--registry-url",
        default=os.environ.get("STROM_SCHEMA_REGISTRY_URL", DEFAULT_REGISTRY_URL),
        help="schema registry URL (env STROM_SCHEMA_REGISTRY_URL; default: %(default)s)",
    )
    parser.add_argument(
        "--registry-user-info",
        metavar="USER:PASSWORD",
        default=os.environ.get("STROM_SCHEMA_REGISTRY_USER_INFO"),
        help="HTTP Basic credentials of a secured registry (env STROM_SCHEMA_REGISTRY_USER_INFO)",
    )
    parser.add_argument(
        "--registry-cafile",
        metavar="FILE",
        default=os.environ.get("STROM_SCHEMA_REGISTRY_CAFILE"),
        help="CA certificate of an https registry (env STROM_SCHEMA_REGISTRY_CAFILE)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON")


def _schema_args(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--schema", metavar="FILE", help="the schema's file ('-': stdin)")
    source.add_argument("--schema-text", metavar="TEXT", help="the schema itself")
    parser.add_argument("--type", choices=_TYPES, type=str.upper, help="the schema's type")
    parser.add_argument(
        "--reference", action="append", default=[], metavar="NAME=SUBJECT:VERSION",
        help="a schema it references (repeatable)",
    )  # fmt: skip


def add_parsers(commands: Any) -> None:
    schemas = commands.add_parser("schemas", help="register, list, get, check, delete schemas")
    actions = schemas.add_subparsers(dest="action", metavar="ACTION", required=True)

    register = actions.add_parser("register", help="register a schema under a subject")
    register.add_argument("subject")
    _schema_args(register)
    _common(register)
    register.set_defaults(handler=schemas_register)

    listing = actions.add_parser("list", help="subjects, or one subject's versions")
    listing.add_argument("subject", nargs="?", help="list this subject's versions")
    listing.add_argument("--deleted", action="store_true", help="include soft-deleted subjects")
    _common(listing)
    listing.set_defaults(handler=schemas_list)

    get = actions.add_parser("get", help="a subject's version, or a schema by id")
    target = get.add_mutually_exclusive_group(required=True)
    target.add_argument("subject", nargs="?")
    target.add_argument("--id", type=int, help="the schema with this global id")
    get.add_argument("--version", default="latest", help="default: %(default)s")
    _common(get)
    get.set_defaults(handler=schemas_get)

    check = actions.add_parser(
        "check", help="whether a schema may be registered under a subject (exit 1: no)"
    )
    check.add_argument("subject")
    check.add_argument("--version", help="check against this version only")
    _schema_args(check)
    _common(check)
    check.set_defaults(handler=schemas_check)

    delete = actions.add_parser("delete", help="delete a subject or one of its versions")
    delete.add_argument("subject")
    delete.add_argument("--version", help="only this version")
    delete.add_argument(
        "--permanent", action="store_true", help="remove for good (after a soft delete)"
    )
    _common(delete)
    delete.set_defaults(handler=schemas_delete)


def _registry(args: argparse.Namespace) -> SchemaRegistryClient:
    return SchemaRegistryClient(
        args.registry_url,
        basic_auth_user_info=args.registry_user_info,
        ssl_cafile=args.registry_cafile,
    )


def _reference(text: str) -> SchemaReference:
    name, _, rest = text.partition("=")
    subject, _, version = rest.rpartition(":")
    if not name or not subject or not version.lstrip("-").isdigit():
        raise ConfigurationError(f"--reference: expected NAME=SUBJECT:VERSION, got {text!r}")
    return SchemaReference(name, subject, int(version))


def _read_schema(args: argparse.Namespace) -> tuple[str, str, tuple[SchemaReference, ...]]:
    """The schema text, its type and its references, from the arguments."""
    if args.schema_text is not None:
        text, suffix = args.schema_text, ""
    elif args.schema == "-":
        text, suffix = sys.stdin.read(), ""
    else:
        path = Path(args.schema)
        try:
            text = path.read_text()
        except OSError as exc:
            raise ConfigurationError(f"--schema {path}: {exc.strerror}") from None
        suffix = path.suffix.lower()
    schema_type = args.type or _guess_type(text, suffix)
    return text, schema_type, tuple(_reference(r) for r in args.reference)


def _guess_type(text: str, suffix: str) -> str:
    if suffix == ".proto":
        return "PROTOBUF"
    try:
        document = json.loads(text)
    except json.JSONDecodeError:
        return "PROTOBUF" if "message" in text or "syntax" in text else "AVRO"
    looks_json_schema = isinstance(document, dict) and (
        "$schema" in document or "properties" in document or document.get("type") == "object"
    )
    return "JSON" if looks_json_schema else "AVRO"


def schemas_register(args: argparse.Namespace) -> int:
    text, schema_type, references = _read_schema(args)
    with _registry(args) as registry:
        schema_id = registry.register(args.subject, text, schema_type, references)
        found = registry.lookup(args.subject, text, schema_type, references)
    _emit(
        args,
        {"subject": args.subject, "version": found.version, "id": schema_id},
        f"registered {args.subject} version {found.version}: schema id {schema_id}",
    )
    return 0


def schemas_list(args: argparse.Namespace) -> int:
    with _registry(args) as registry:
        if args.subject:
            rows = [registry.version(args.subject, v) for v in registry.versions(args.subject)]
        elif args.deleted:
            subjects = registry.subjects(deleted=True)
            _emit(args, subjects, "\n".join(subjects))
            return 0
        else:
            rows = [registry.version(s, "latest") for s in registry.subjects()]
    _emit(
        args,
        [{"subject": r.subject, "version": r.version, "id": r.schema_id,
          "schemaType": r.schema_type} for r in rows],
        _table(("SUBJECT", "VERSION", "ID", "TYPE"),
               ((r.subject, r.version, r.schema_id, r.schema_type) for r in rows)),
    )  # fmt: skip
    return 0


def _pretty(schema: str, schema_type: str) -> str:
    if schema_type == "PROTOBUF":
        return schema
    try:
        return json.dumps(json.loads(schema), indent=2)
    except json.JSONDecodeError:
        return schema


def schemas_get(args: argparse.Namespace) -> int:
    with _registry(args) as registry:
        found = registry.schema(args.id) if args.id is not None else registry.version(
            args.subject, args.version
        )  # fmt: skip
    value = {"subject": found.subject, "version": found.version, "id": found.schema_id,
             "schemaType": found.schema_type, "schema": found.schema,
             "references": [r.to_json() for r in found.references]}  # fmt: skip
    title = (
        f"{found.subject} version {found.version}, " if found.subject else ""
    ) + f"id {found.schema_id} ({found.schema_type})"
    _emit(args, value, f"{title}\n{_pretty(found.schema, found.schema_type)}")
    return 0


def schemas_check(args: argparse.Namespace) -> int:
    text, schema_type, references = _read_schema(args)
    with _registry(args) as registry:
        ok, problems = registry.is_compatible(
            args.subject, text, schema_type, references, version=args.version
        )
    lines = ["compatible" if ok else "incompatible", *(f"  {p}" for p in problems)]
    _emit(args, {"is_compatible": ok, "messages": problems}, "\n".join(lines))
    return 0 if ok else 1


def schemas_delete(args: argparse.Namespace) -> int:
    with _registry(args) as registry:
        if args.version is not None:
            deleted = [registry.delete_version(args.subject, args.version,
                                               permanent=args.permanent)]  # fmt: skip
        else:
            deleted = registry.delete_subject(args.subject, permanent=args.permanent)
    how = "permanently deleted" if args.permanent else "deleted"
    _emit(args, deleted, f"{how} {args.subject} version(s) {', '.join(map(str, deleted))}")
    return 0

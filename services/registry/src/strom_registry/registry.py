"""The registry's operations, as Confluent's REST API defines them, over ``RegistryState``.

Reads answer from the state; writes (register, delete, config, mode) are decided here and go
through a ``SchemaStore``: the ``_schemas`` topic in the service, a list in tests. Only the
elected writer calls the write operations (the HTTP layer forwards them to it). Plain Python:
no network, no HTTP.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from strom_registry import errors, records
from strom_registry.compatibility import compatibility_problems
from strom_registry.formats import ParsedSchema, ResolvedReference, parse_schema
from strom_registry.model import (
    COMPATIBILITY_LEVELS,
    DEFAULT_COMPATIBILITY,
    DEFAULT_MODE,
    MODES,
    Schema,
    SchemaReference,
    SchemaType,
    SubjectVersion,
)
from strom_registry.state import RegistryState

__all__ = ["Registry", "SchemaStore", "parse_version"]

_MAX_VERSION = (1 << 31) - 1
_READ_ONLY = ("READONLY", "READONLY_OVERRIDE")


class SchemaStore(Protocol):
    """Where the writer's records go; each call returns once the state has applied them."""

    async def sync(self) -> None:
        """Return once the state holds every record written before the call."""

    async def write(self, batch: Sequence[records.Record]) -> None:
        """Append ``batch`` and return once the state has applied it."""

    async def next_id(self, at_least: int) -> int:
        """A schema id never given before, at least ``at_least``."""


def parse_version(text: str | int, *, allow_latest: bool = True) -> int:
    """A version path segment: ``latest`` or -1 (as -1), else 1..2^31-1; 42202 otherwise."""
    if allow_latest and str(text) in ("latest", "-1"):
        return -1
    try:
        version = int(text)
    except (TypeError, ValueError):
        raise errors.invalid_version(text) from None
    if not 1 <= version <= _MAX_VERSION:
        raise errors.invalid_version(text)
    return version


def check_subject(subject: str) -> str:
    if not subject or any(ord(c) < 32 for c in subject):
        raise errors.invalid_subject(subject)
    return subject


class Registry:
    """The registry's operations (see the module docstring)."""

    def __init__(self, state: RegistryState, store: SchemaStore, *,
                 default_compatibility: str = DEFAULT_COMPATIBILITY) -> None:  # fmt: skip
        self.state = state
        self.store = store
        self.default_compatibility = default_compatibility
        self._write_lock = asyncio.Lock()
        self._parsed: dict[Schema, ParsedSchema] = {}

    # --- parsing -------------------------------------------------------------------------

    def schema_from_request(self, body: Mapping[str, Any]) -> tuple[Schema, ParsedSchema]:
        """The schema of a register / lookup / compatibility request body, parsed."""
        if not isinstance(body, Mapping) or not isinstance(body.get("schema"), str):
            raise errors.InvalidSchemaError("Invalid schema: the body needs a string 'schema'")
        type_name = body.get("schemaType") or "AVRO"
        try:
            schema_type = SchemaType(str(type_name).upper())
        except ValueError:
            raise errors.InvalidSchemaError(
                f"Invalid schema: unknown schemaType {type_name!r} (AVRO, JSON or PROTOBUF)"
            ) from None
        references = tuple(self._reference(r) for r in body.get("references") or ())
        parsed = parse_schema(schema_type, body["schema"], self._resolve(references))
        schema = Schema(schema_type, parsed.canonical, references)
        self._parsed.setdefault(schema, parsed)
        return schema, parsed

    def _reference(self, raw: Any) -> SchemaReference:
        try:
            ref = SchemaReference(str(raw["name"]), str(raw["subject"]), int(raw["version"]))
        except (KeyError, TypeError, ValueError):
            raise errors.InvalidSchemaError(
                f"Invalid schema: a reference needs name, subject and version, got {raw!r}"
            ) from None
        return ref

    def _resolve(self, references: Sequence[SchemaReference],
                 seen: frozenset[str] = frozenset()) -> list[ResolvedReference]:  # fmt: skip
        """Referenced schemas, dependencies first."""
        resolved: list[ResolvedReference] = []
        for ref in references:
            key = f"{ref.subject}/{ref.version}"
            if key in seen:
                raise errors.InvalidSchemaError(f"Invalid schema: circular reference {key}")
            versions = self.state.subjects.get(ref.subject, {})
            version = max(versions) if ref.version == -1 and versions else ref.version
            entry = versions.get(version)
            if entry is None:
                raise errors.InvalidSchemaError(
                    f"Invalid schema: reference {ref.name!r} names subject {ref.subject!r} "
                    f"version {ref.version}, which does not exist"
                )
            target = self.state.schemas[entry.schema_id]
            resolved += self._resolve(target.references, seen | {key})
            resolved.append(ResolvedReference(ref.name, target.text))
        return resolved

    def parsed(self, schema: Schema) -> ParsedSchema:
        found = self._parsed.get(schema)
        if found is None:
            found = parse_schema(schema.schema_type, schema.text, self._resolve(schema.references))
            self._parsed[schema] = found
        return found

    # --- reads ---------------------------------------------------------------------------

    def subjects(self, *, deleted: bool = False, prefix: str = "") -> list[str]:
        return sorted(
            s for s in self.state.subjects
            if s.startswith(prefix) and self.state.versions(s, deleted=deleted)
        )  # fmt: skip

    def _live_versions(self, subject: str, *, deleted: bool = False) -> list[SubjectVersion]:
        found = self.state.versions(subject, deleted=deleted)
        if not found:
            raise errors.subject_not_found(subject)
        return found

    def versions(self, subject: str, *, deleted: bool = False) -> list[int]:
        return [e.version for e in self._live_versions(subject, deleted=deleted)]

    def version(self, subject: str, version: str | int, *, deleted: bool = False) -> SubjectVersion:
        number = parse_version(version)
        found = self._live_versions(subject, deleted=deleted)
        if number == -1:
            live = [e for e in found if not e.deleted] or found
            return live[-1]
        for entry in found:
            if entry.version == number:
                return entry
        raise errors.version_not_found(number)

    def describe(self, entry: SubjectVersion) -> dict[str, Any]:
        """A version as Confluent answers it."""
        described: dict[str, Any] = {
            "subject": entry.subject,
            "version": entry.version,
            "id": entry.schema_id,
        }
        described.update(self.describe_schema(self.state.schemas[entry.schema_id]))
        return described

    @staticmethod
    def describe_schema(schema: Schema) -> dict[str, Any]:
        described: dict[str, Any] = {"schema": schema.text}
        if schema.schema_type is not SchemaType.AVRO:
            described["schemaType"] = schema.schema_type.value
        if schema.references:
            described["references"] = [r.to_json() for r in schema.references]
        return described

    def schema(self, schema_id: int) -> Schema:
        found = self.state.schemas.get(schema_id)
        if found is None:
            raise errors.schema_not_found(schema_id)
        return found

    def subjects_of(self, schema_id: int, *, deleted: bool = False) -> list[str]:
        self.schema(schema_id)
        return sorted(
            {e.subject for e in self.state.uses_of(schema_id) if deleted or not e.deleted}
        )

    def versions_of(self, schema_id: int, *, deleted: bool = False) -> list[dict[str, Any]]:
        self.schema(schema_id)
        return [
            {"subject": e.subject, "version": e.version}
            for e in self.state.uses_of(schema_id)
            if deleted or not e.deleted
        ]

    def lookup(self, subject: str, body: Mapping[str, Any], *,
               deleted: bool = False) -> dict[str, Any]:  # fmt: skip
        """POST /subjects/{subject}: the version of ``subject`` holding this schema."""
        found = self._live_versions(subject, deleted=deleted)
        schema, _ = self.schema_from_request(body)
        schema_id = self.state.ids.get(schema)
        for entry in reversed(found):
            if entry.schema_id == schema_id:
                return self.describe(entry)
        raise errors.schema_not_found()

    def referenced_by(self, subject: str, version: str | int) -> list[int]:
        entry = self.version(subject, version, deleted=True)
        return self.state.referrers(subject, entry.version)

    def compatibility(self, subject: str | None) -> str:
        """The level in force for ``subject``: its own, else the global one, else the default."""
        return (
            self.state.configs.get(subject)
            or self.state.configs.get(None)
            or self.default_compatibility
        )

    def config(self, subject: str | None, *, default_to_global: bool = False) -> str:
        if subject is None or default_to_global:
            return self.compatibility(subject)
        level = self.state.configs.get(subject)
        if level is None:
            raise errors.no_subject_compatibility(subject)
        return level

    def mode(self, subject: str | None, *, default_to_global: bool = True) -> str:
        if subject is not None:
            mode = self.state.modes.get(subject)
            if mode is not None:
                return mode
            if not default_to_global:
                raise errors.no_subject_mode(subject)
        return self.state.modes.get(None, DEFAULT_MODE)

    def check_compatibility(self, subject: str, version: str | int | None,
                            body: Mapping[str, Any]) -> list[str]:  # fmt: skip
        """POST /compatibility/subjects/{subject}/versions[/{version}]: the problems found."""
        if version is not None:
            number = parse_version(version)
            target = self.version(subject, number)
            previous = [target]
        else:
            previous = self.state.versions(subject)
        _, parsed = self.schema_from_request(body)
        level = self.compatibility(subject)
        if version is not None and level.endswith("_TRANSITIVE"):
            level = level.removesuffix("_TRANSITIVE")
        olds = [self.parsed(self.state.schemas[e.schema_id]) for e in previous]
        return compatibility_problems(level, parsed, olds)

    # --- writes (the elected writer only) ------------------------------------------------

    def _check_writable(self, subject: str | None) -> None:
        mode = self.mode(subject)
        if mode in _READ_ONLY:
            where = "The registry" if subject is None else f"Subject {subject}"
            raise errors.operation_not_permitted(f"{where} is in read-only mode")

    async def register(self, subject: str, body: Mapping[str, Any]) -> int:
        """POST /subjects/{subject}/versions: the schema's id (a new version when needed)."""
        check_subject(subject)
        async with self._write_lock:
            await self.store.sync()
            self._check_writable(subject)
            schema, parsed = self.schema_from_request(body)
            importing = self.mode(subject) == "IMPORT"
            wanted_id, wanted_version = body.get("id"), body.get("version")
            if not importing:
                if wanted_id is not None:
                    raise errors.operation_not_permitted(
                        "Registering a schema with a given id needs IMPORT mode"
                    )
                wanted_version = None
            all_versions = self.state.versions(subject, deleted=True)
            live = [e for e in all_versions if not e.deleted]
            known_id = self.state.ids.get(schema)
            for entry in reversed(live):
                if entry.schema_id == known_id and wanted_id in (None, known_id):
                    return entry.schema_id
            if not importing:
                olds = [self.parsed(self.state.schemas[e.schema_id]) for e in live]
                problems = compatibility_problems(self.compatibility(subject), parsed, olds)
                if problems:
                    raise errors.IncompatibleSchemaError(
                        "Schema being registered is incompatible with an earlier schema for "
                        f'subject "{subject}", details: {problems}',
                        problems,
                    )
            schema_id = await self._id_for(schema, wanted_id)
            version = self._version_for(subject, all_versions, wanted_version)
            entry = SubjectVersion(subject, version, schema_id)
            await self.store.write([records.schema_record(entry, schema)])
            return schema_id

    async def _id_for(self, schema: Schema, wanted: Any) -> int:
        known = self.state.ids.get(schema)
        if wanted is None:
            return known if known is not None else await self.store.next_id(self.state.max_id + 1)
        try:
            wanted_id = int(wanted)
        except (TypeError, ValueError):
            raise errors.InvalidSchemaError(f"Invalid schema id {wanted!r}") from None
        existing = self.state.schemas.get(wanted_id)
        if existing is not None and existing != schema:
            raise errors.already_exists(
                f"Schema id {wanted_id} already holds another schema; overwriting a schema is "
                "not permitted"
            )
        if wanted_id < 1:
            raise errors.InvalidSchemaError(f"Invalid schema id {wanted_id}")
        return wanted_id

    @staticmethod
    def _version_for(subject: str, all_versions: list[SubjectVersion], wanted: Any) -> int:
        if wanted is None:
            return all_versions[-1].version + 1 if all_versions else 1
        version = parse_version(wanted, allow_latest=False)
        if any(e.version == version for e in all_versions):
            raise errors.already_exists(f"Subject '{subject}' already has version {version}")
        return version

    async def delete_subject(self, subject: str, *, permanent: bool = False) -> list[int]:
        async with self._write_lock:
            await self.store.sync()
            self._check_writable(subject)
            every = self.state.versions(subject, deleted=True)
            if not every:
                raise errors.subject_not_found(subject)
            live = [e for e in every if not e.deleted]
            if permanent:
                if live:
                    raise errors.subject_not_soft_deleted(subject)
                await self._write_permanent_delete(every)
                return [e.version for e in every]
            if not live:
                raise errors.subject_soft_deleted(subject)
            self._check_unreferenced(live)
            await self.store.write(
                [records.schema_record(_soft_deleted(e), self.state.schemas[e.schema_id])
                 for e in live]
            )  # fmt: skip
            return [e.version for e in live]

    async def delete_version(self, subject: str, version: str | int, *,
                             permanent: bool = False) -> int:  # fmt: skip
        async with self._write_lock:
            await self.store.sync()
            self._check_writable(subject)
            number = parse_version(version)
            every = self.state.versions(subject, deleted=True)
            if not every:
                raise errors.subject_not_found(subject)
            if number == -1:
                live = [e for e in every if not e.deleted]
                if not permanent and not live:
                    raise errors.subject_soft_deleted(subject)
                number = (live or every)[-1].version
            entry = next((e for e in every if e.version == number), None)
            if entry is None:
                raise errors.version_not_found(number)
            if permanent:
                if not entry.deleted:
                    raise errors.version_not_soft_deleted(subject, number)
                await self._write_permanent_delete([entry])
                return number
            if entry.deleted:
                raise errors.version_soft_deleted(subject, number)
            self._check_unreferenced([entry])
            await self.store.write(
                [records.schema_record(_soft_deleted(entry), self.state.schemas[entry.schema_id])]
            )
            return number

    def _check_unreferenced(self, entries: Sequence[SubjectVersion]) -> None:
        for entry in entries:
            referrers = self.state.referrers(entry.subject, entry.version)
            if referrers:
                raise errors.reference_exists(
                    f"One or more references exist to the schema {{subject={entry.subject}, "
                    f"version={entry.version}}}: schema ids {referrers}"
                )

    async def _write_permanent_delete(self, entries: Sequence[SubjectVersion]) -> None:
        batch = [records.watermark_record(self.state.max_id)]
        batch += [records.schema_tombstone(e.subject, e.version) for e in entries]
        await self.store.write(batch)

    async def set_config(self, subject: str | None, body: Mapping[str, Any]) -> str:
        level = body.get("compatibility") if isinstance(body, Mapping) else None
        if not isinstance(level, str) or level.upper() not in COMPATIBILITY_LEVELS:
            raise errors.invalid_compatibility_level(level)
        if subject is not None:
            check_subject(subject)
        async with self._write_lock:
            await self.store.sync()
            await self.store.write([records.config_record(subject, level.upper())])
        return level.upper()

    async def delete_config(self, subject: str | None) -> str:
        async with self._write_lock:
            await self.store.sync()
            level = self.config(subject) if subject is not None else self.compatibility(None)
            await self.store.write([records.config_record(subject, None)])
        return level

    async def set_mode(self, subject: str | None, body: Mapping[str, Any], *,
                       force: bool = False) -> str:  # fmt: skip
        mode = body.get("mode") if isinstance(body, Mapping) else None
        if not isinstance(mode, str) or mode.upper() not in MODES:
            raise errors.invalid_mode(mode)
        mode = mode.upper()
        async with self._write_lock:
            await self.store.sync()
            if mode == "IMPORT" and not force:
                non_empty = self.subjects() if subject is None else self.state.versions(subject)
                if non_empty:
                    raise errors.operation_not_permitted(
                        "Cannot import since found existing subjects"
                    )
            await self.store.write([records.mode_record(subject, mode)])
        return mode

    async def delete_mode(self, subject: str) -> str:
        async with self._write_lock:
            await self.store.sync()
            mode = self.mode(subject, default_to_global=False)
            await self.store.write([records.mode_record(subject, None)])
        return mode


def _soft_deleted(entry: SubjectVersion) -> SubjectVersion:
    return SubjectVersion(entry.subject, entry.version, entry.schema_id, deleted=True)

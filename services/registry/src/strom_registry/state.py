"""What the registry knows, rebuilt by applying the ``_schemas`` records in log order."""

from __future__ import annotations

from strom_registry import records
from strom_registry.model import Schema, SubjectVersion
from strom_server.runtime.logs import get_logger

__all__ = ["RegistryState"]

log = get_logger(__name__)


class RegistryState:
    """Subjects and their versions, schemas by id, configs and modes; ``apply`` feeds it."""

    def __init__(self) -> None:
        self.subjects: dict[str, dict[int, SubjectVersion]] = {}
        self.schemas: dict[int, Schema] = {}
        self.ids: dict[Schema, int] = {}
        self.configs: dict[str | None, str] = {}
        self.modes: dict[str | None, str] = {}
        #: The highest schema id ever given (never handed out again).
        self.max_id = 0

    def apply(self, key: bytes | None, value: bytes | None) -> None:
        """Apply one record; a malformed or unknown record is logged and skipped."""
        if key is None:
            return
        try:
            self._apply(records.decode_key(key), value)
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("skipping a malformed _schemas record", key=key[:200], error=str(exc))

    def _apply(self, key: records.Key | None, value: bytes | None) -> None:
        if isinstance(key, records.SchemaKey):
            if value is None:
                self._remove(key.subject, key.version)
            else:
                self._put(*records.decode_schema_value(value))
        elif isinstance(key, records.ConfigKey):
            if value is None:
                self.configs.pop(key.subject, None)
            else:
                self.configs[key.subject] = str(records.decode_value(value)["compatibilityLevel"])
        elif isinstance(key, records.ModeKey):
            if value is None:
                self.modes.pop(key.subject, None)
            else:
                self.modes[key.subject] = str(records.decode_value(value)["mode"])
        elif isinstance(key, records.WatermarkKey) and value is not None:
            self.max_id = max(self.max_id, int(records.decode_value(value)["id"]))

    def _put(self, entry: SubjectVersion, schema: Schema) -> None:
        versions = self.subjects.setdefault(entry.subject, {})
        previous = versions.get(entry.version)
        versions[entry.version] = entry
        if previous is not None and previous.schema_id != entry.schema_id:
            self._forget_unused(previous.schema_id)
        self.schemas[entry.schema_id] = schema
        self.ids.setdefault(schema, entry.schema_id)
        self.max_id = max(self.max_id, entry.schema_id)

    def _remove(self, subject: str, version: int) -> None:
        versions = self.subjects.get(subject, {})
        entry = versions.pop(version, None)
        if not versions:
            self.subjects.pop(subject, None)
        if entry is not None:
            self._forget_unused(entry.schema_id)

    def _forget_unused(self, schema_id: int) -> None:
        if any(
            e.schema_id == schema_id
            for versions in self.subjects.values()
            for e in versions.values()
        ):
            return
        schema = self.schemas.pop(schema_id, None)
        if schema is not None and self.ids.get(schema) == schema_id:
            del self.ids[schema]

    # --- queries -------------------------------------------------------------------------

    def versions(self, subject: str, *, deleted: bool = False) -> list[SubjectVersion]:
        """The subject's versions in order (soft-deleted ones too when ``deleted``)."""
        found = self.subjects.get(subject, {})
        return [found[v] for v in sorted(found) if deleted or not found[v].deleted]

    def uses_of(self, schema_id: int) -> list[SubjectVersion]:
        return sorted(
            (e for versions in self.subjects.values() for e in versions.values()
             if e.schema_id == schema_id),
            key=lambda e: (e.subject, e.version),
        )  # fmt: skip

    def referrers(self, subject: str, version: int) -> list[int]:
        """Ids of live schemas that reference ``subject`` version ``version``."""
        return sorted(
            {
                e.schema_id
                for versions in self.subjects.values()
                for e in versions.values()
                if not e.deleted
                and any(
                    r.subject == subject and r.version == version
                    for r in self.schemas[e.schema_id].references
                )
            }
        )

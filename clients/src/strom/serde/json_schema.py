"""JSON values in the Confluent wire format, checked against a JSON Schema.

``JsonSerializer`` writes ``json.dumps(value)`` (UTF-8) after the header, validating the value
first when ``validate`` is on (needs ``jsonschema``); ``JsonDeserializer`` reads it back,
validating against the writer's schema when asked.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from strom.errors import ConfigurationError
from strom.serde.naming import SubjectNameStrategy, topic_name_strategy
from strom.serde.registry_client import SchemaReference, SchemaRegistryClient
from strom.serde.wire import SerializationError, header, split_frame

__all__ = ["JsonDeserializer", "JsonSerializer"]


def _validator(schema: Any) -> Any:
    try:
        import jsonschema.validators
    except ImportError:
        raise ConfigurationError(
            "JSON Schema validation needs jsonschema: pip install jsonschema"
        ) from None
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft7Validator)
    return cls(schema)


def _check(validator: Any, value: Any) -> None:
    error = next(iter(validator.iter_errors(value)), None)
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "the value"
        raise SerializationError(f"{where} does not match the JSON schema: {error.message}")


class JsonSerializer:
    """``value -> bytes``: a JSON document framed with its schema's id."""

    def __init__(
        self,
        registry: SchemaRegistryClient,
        schema: str | Mapping[str, Any],
        *,
        topic: str | None = None,
        is_key: bool = False,
        subject_name_strategy: SubjectNameStrategy = topic_name_strategy,
        auto_register: bool = True,
        validate: bool = True,
        references: tuple[SchemaReference, ...] = (),
    ) -> None:
        self.registry = registry
        self.schema = schema if isinstance(schema, str) else json.dumps(schema)
        document = json.loads(self.schema)
        self.record_name = document.get("title") if isinstance(document, dict) else None
        self.topic, self.is_key = topic, is_key
        self.subject_name_strategy = subject_name_strategy
        self.auto_register = auto_register
        self.references = references
        self._validator = _validator(document) if validate else None
        self._headers: dict[str | None, bytes] = {}

    def _header(self, topic: str | None) -> bytes:
        found = self._headers.get(topic)
        if found is None:
            subject = self.subject_name_strategy(topic, self.record_name, self.is_key)
            if self.auto_register:
                schema_id = self.registry.register(subject, self.schema, "JSON", self.references)
            else:
                schema_id = self.registry.lookup(
                    subject, self.schema, "JSON", self.references
                ).schema_id
            found = self._headers[topic] = header(schema_id)
        return found

    def serialize(self, value: Any, topic: str | None = None) -> bytes | None:
        if value is None:
            return None
        if self._validator is not None:
            _check(self._validator, value)
        return self._header(topic or self.topic) + json.dumps(value).encode()

    def __call__(self, value: Any) -> bytes | None:
        return self.serialize(value)


class JsonDeserializer:
    """``bytes -> value``: a framed JSON document, validated against its writer's schema when
    ``validate`` is on."""

    def __init__(self, registry: SchemaRegistryClient, *, validate: bool = False) -> None:
        self.registry = registry
        self.validate = validate
        self._validators: dict[int, Any] = {}

    def deserialize(self, data: bytes | None) -> Any:
        if data is None:
            return None
        schema_id, payload = split_frame(data)
        try:
            value = json.loads(bytes(payload))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise SerializationError(f"value is not JSON: {exc}") from None
        if self.validate:
            validator = self._validators.get(schema_id)
            if validator is None:
                registered = self.registry.schema(schema_id)
                validator = self._validators[schema_id] = _validator(json.loads(registered.schema))
            _check(validator, value)
        return value

    def __call__(self, data: bytes) -> Any:
        return self.deserialize(data)

"""A small client of a Confluent-compatible schema registry (Strom's, Confluent's, Karapace),
on httpx2: a pool of kept-alive connections, TLS through an ``ssl.SSLContext``, a timeout on
every call, no proxy from the environment.

Schemas by id and ids by (subject, schema) are cached without expiry: a registered schema
never changes. Thread-safe (the pool is; calls from several threads run side by side). A call
that cannot reach the registry is tried once more on a fresh connection, then is a
``StromError``; a refusal is ``SchemaRegistryError`` with the registry's HTTP status and
``error_code``.
"""

from __future__ import annotations

import base64
import json
import ssl
import threading
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import httpx2

from strom.errors import ConfigurationError, StromError

__all__ = ["RegisteredSchema", "SchemaReference", "SchemaRegistryClient", "SchemaRegistryError"]

_CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


class SchemaRegistryError(StromError):
    """The registry refused a request: ``status`` (HTTP) and ``error_code`` (Confluent's)."""

    def __init__(self, status: int, error_code: int, message: str) -> None:
        super().__init__(f"schema registry: {message} (HTTP {status}, error code {error_code})")
        self.status = status
        self.error_code = error_code


@dataclass(frozen=True)
class SchemaReference:
    name: str
    subject: str
    version: int

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True)
class RegisteredSchema:
    """A schema as the registry holds it; ``subject`` and ``version`` when known."""

    schema_id: int
    schema: str
    schema_type: str = "AVRO"
    references: tuple[SchemaReference, ...] = field(default=())
    subject: str | None = None
    version: int | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any], schema_id: int | None = None) -> RegisteredSchema:
        return cls(
            schema_id=int(data.get("id", schema_id or 0)),
            schema=str(data["schema"]),
            schema_type=str(data.get("schemaType") or "AVRO"),
            references=tuple(
                SchemaReference(str(r["name"]), str(r["subject"]), int(r["version"]))
                for r in data.get("references") or ()
            ),
            subject=data.get("subject"),
            version=data.get("version"),
        )


def _body(schema: str, schema_type: str, references: tuple[SchemaReference, ...]) -> Any:
    body: dict[str, Any] = {"schema": schema}
    if schema_type != "AVRO":
        body["schemaType"] = schema_type
    if references:
        body["references"] = [r.to_json() for r in references]
    return body


def _basic_auth_header(user_info: str | None) -> str | None:
    """The ``Authorization`` header of ``user:password`` (None: no authentication)."""
    if user_info is None:
        return None
    user, colon, password = user_info.partition(":")
    if not user or not colon:
        raise ConfigurationError("schema registry basic auth: expected user:password")
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


class SchemaRegistryClient:
    """The registry's REST API, the calls serializers and the CLI need (see module docstring)."""

    def __init__(
        self,
        url: str = "http://127.0.0.1:8081",
        *,
        timeout_s: float = 30.0,
        basic_auth_user_info: str | None = None,
        ssl_cafile: str | None = None,
    ) -> None:
        """``basic_auth_user_info``: ``user:password`` for HTTP Basic authentication (as
        Confluent's ``basic.auth.user.info``; a ``user:password@`` in ``url`` does the same);
        ``ssl_cafile``: the CA that signed an https registry's certificate (default: the
        system's trusted CAs)."""
        parts = urlsplit(url if "://" in url else f"http://{url}")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigurationError(f"schema registry URL {url!r}: expected http://host:port")
        if parts.username is not None and basic_auth_user_info is None:
            basic_auth_user_info = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        self.url = url.replace(parts.netloc, parts.netloc.rpartition("@")[2], 1)  # no password
        self._auth = _basic_auth_header(basic_auth_user_info)
        https = parts.scheme == "https"
        if ssl_cafile is not None and not https:
            raise ConfigurationError(f"ssl_cafile {ssl_cafile!r} needs an https:// registry URL")
        self._ssl = ssl.create_default_context(cafile=ssl_cafile) if https else None
        self._base = f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}{parts.path.rstrip('/')}"
        self._timeout = timeout_s
        self._lock = threading.Lock()
        self._client: httpx2.Client | None = None
        self._by_id: dict[int, RegisteredSchema] = {}
        self._ids: dict[tuple[str, str, str, tuple[SchemaReference, ...]], int] = {}
        self._versions: dict[tuple[str, int], RegisteredSchema] = {}

    # --- transport -----------------------------------------------------------------------

    def _http(self) -> httpx2.Client:
        with self._lock:
            if self._client is None:
                self._client = httpx2.Client(
                    verify=self._ssl if self._ssl is not None else True,
                    timeout=self._timeout,
                    trust_env=False,
                )
            return self._client

    def request(self, method: str, path: str, body: Any = None) -> Any:
        """One call; the decoded JSON answer, or ``SchemaRegistryError``."""
        payload = None if body is None else json.dumps(body).encode()
        headers = {"Accept": _CONTENT_TYPE, "Content-Type": _CONTENT_TYPE}
        if self._auth:
            headers["Authorization"] = self._auth
        for attempt in (1, 2):
            try:
                answer = self._http().request(
                    method, self._base + path, content=payload, headers=headers
                )
                break
            except httpx2.TransportError as exc:  # the pool drops the failed connection
                if attempt == 2:
                    raise StromError(f"schema registry at {self.url} unreachable: {exc}") from None
        raw = answer.content
        try:
            data = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            data = raw.decode(errors="replace")
        if answer.status_code >= 400:
            if isinstance(data, dict):
                code = int(data.get("error_code", answer.status_code))
                raise SchemaRegistryError(answer.status_code, code, str(data.get("message")))
            raise SchemaRegistryError(answer.status_code, answer.status_code, str(data))
        return data

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    # --- schemas -------------------------------------------------------------------------

    def register(self, subject: str, schema: str, schema_type: str = "AVRO",
                 references: tuple[SchemaReference, ...] = ()) -> int:  # fmt: skip
        """Register ``schema`` under ``subject`` (a new version when it is new); its id."""
        key = (subject, schema, schema_type, references)
        found = self._ids.get(key)
        if found is None:
            answer = self.request("POST", f"/subjects/{quote(subject, safe='')}/versions",
                                  _body(schema, schema_type, references))  # fmt: skip
            found = self._ids[key] = int(answer["id"])
        return found

    def lookup(self, subject: str, schema: str, schema_type: str = "AVRO",
               references: tuple[SchemaReference, ...] = ()) -> RegisteredSchema:  # fmt: skip
        """The version of ``subject`` holding ``schema`` (40403 when it has none)."""
        answer = self.request("POST", f"/subjects/{quote(subject, safe='')}",
                              _body(schema, schema_type, references))  # fmt: skip
        found = RegisteredSchema.from_json(answer)
        self._ids[(subject, schema, schema_type, references)] = found.schema_id
        return found

    def schema(self, schema_id: int) -> RegisteredSchema:
        """The schema with this id (cached)."""
        found = self._by_id.get(schema_id)
        if found is None:
            answer = self.request("GET", f"/schemas/ids/{schema_id}")
            found = self._by_id[schema_id] = RegisteredSchema.from_json(answer, schema_id)
        return found

    def version(self, subject: str, version: int | str = "latest") -> RegisteredSchema:
        """One version of ``subject`` (``latest`` is never cached)."""
        key = (subject, version) if isinstance(version, int) else None
        if key is not None and key in self._versions:
            return self._versions[key]
        answer = self.request("GET", f"/subjects/{quote(subject, safe='')}/versions/{version}")
        found = RegisteredSchema.from_json(answer)
        if key is not None:
            self._versions[key] = found
        return found

    def subjects(self, *, deleted: bool = False) -> list[str]:
        return list(self.request("GET", f"/subjects?deleted={str(deleted).lower()}"))

    def versions(self, subject: str) -> list[int]:
        return list(self.request("GET", f"/subjects/{quote(subject, safe='')}/versions"))

    def is_compatible(self, subject: str, schema: str, schema_type: str = "AVRO",
                      references: tuple[SchemaReference, ...] = (),
                      version: int | str | None = None) -> tuple[bool, list[str]]:  # fmt: skip
        """Whether ``schema`` may be registered under ``subject`` (against ``version`` only
        when given), and the registry's reasons when not."""
        path = f"/compatibility/subjects/{quote(subject, safe='')}/versions"
        if version is not None:
            path += f"/{version}"
        answer = self.request("POST", path + "?verbose=true",
                              _body(schema, schema_type, references))  # fmt: skip
        return bool(answer["is_compatible"]), list(answer.get("messages") or [])

    def delete_subject(self, subject: str, *, permanent: bool = False) -> list[int]:
        path = f"/subjects/{quote(subject, safe='')}?permanent={str(permanent).lower()}"
        return list(self.request("DELETE", path))

    def delete_version(self, subject: str, version: int | str, *,
                       permanent: bool = False) -> int:  # fmt: skip
        path = f"/subjects/{quote(subject, safe='')}/versions/{version}"
        return int(self.request("DELETE", f"{path}?permanent={str(permanent).lower()}"))

    def compatibility(self, subject: str | None = None) -> str:
        path = "/config" if subject is None else f"/config/{quote(subject, safe='')}"
        suffix = "" if subject is None else "?defaultToGlobal=true"
        return str(self.request("GET", path + suffix)["compatibilityLevel"])

    def set_compatibility(self, level: str, subject: str | None = None) -> str:
        path = "/config" if subject is None else f"/config/{quote(subject, safe='')}"
        return str(self.request("PUT", path, {"compatibility": level.upper()})["compatibility"])

    def referenced_schemas(self, found: RegisteredSchema) -> list[tuple[str, RegisteredSchema]]:
        """Every schema ``found`` references, transitively, dependencies first."""
        ordered: list[tuple[str, RegisteredSchema]] = []
        seen: set[tuple[str, int]] = set()

        def visit(refs: tuple[SchemaReference, ...]) -> None:
            for ref in refs:
                if (ref.subject, ref.version) in seen:
                    continue
                seen.add((ref.subject, ref.version))
                target = self.version(ref.subject, ref.version)
                visit(target.references)
                ordered.append((ref.name, target))

        visit(found.references)
        return ordered

    def __enter__(self) -> SchemaRegistryClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

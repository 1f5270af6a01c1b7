"""Confluent Schema Registry's errors: HTTP status, ``error_code`` and message.

The HTTP layer turns every ``RegistryError`` into ``{"error_code": ..., "message": ...}`` with
the status; the codes and statuses are Confluent's, so its clients react as they would there.
"""

from __future__ import annotations

__all__ = [
    "IncompatibleSchemaError",
    "InvalidSchemaError",
    "RegistryError",
    "already_exists",
    "bad_request",
    "forwarding_failed",
    "invalid_compatibility_level",
    "invalid_mode",
    "invalid_subject",
    "invalid_version",
    "no_subject_compatibility",
    "no_subject_mode",
    "operation_not_permitted",
    "reference_exists",
    "schema_not_found",
    "store_error",
    "store_timeout",
    "subject_not_found",
    "subject_not_soft_deleted",
    "subject_soft_deleted",
    "unknown_leader",
    "version_not_found",
    "version_not_soft_deleted",
    "version_soft_deleted",
]


class RegistryError(Exception):
    """An error answered as Confluent answers it: ``status`` and ``error_code``."""

    def __init__(self, status: int, error_code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.message = message

    def to_json(self) -> dict[str, object]:
        return {"error_code": self.error_code, "message": self.message}


class InvalidSchemaError(RegistryError):
    """The schema does not parse (422, 42201)."""

    def __init__(self, message: str) -> None:
        super().__init__(422, 42201, message)


class IncompatibleSchemaError(RegistryError):
    """The schema breaks the subject's compatibility level (409, 409)."""

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        super().__init__(409, 409, message)
        self.problems = problems or []


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40401, f"Subject '{subject}' not found.")


def version_not_found(version: object) -> RegistryError:
    return RegistryError(404, 40402, f"Version {version} not found.")


def schema_not_found(schema_id: int | None = None) -> RegistryError:
    what = "Schema not found" if schema_id is None else f"Schema {schema_id} not found"
    return RegistryError(404, 40403, what)


def subject_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(
        404, 40404,
        f"Subject '{subject}' was soft deleted. Set permanent=true to delete permanently",
    )  # fmt: skip


def subject_not_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(
        404, 40405, f"Subject '{subject}' was not deleted first before being permanently deleted"
    )


def version_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(
        404, 40406,
        f"Subject '{subject}' Version {version} was soft deleted. Set permanent=true to delete "
        "permanently",
    )  # fmt: skip


def version_not_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(
        404, 40407,
        f"Subject '{subject}' Version {version} was not deleted first before being permanently "
        "deleted",
    )  # fmt: skip


def no_subject_compatibility(subject: str) -> RegistryError:
    return RegistryError(
        404, 40408, f"Subject '{subject}' does not have subject-level compatibility configured"
    )


def no_subject_mode(subject: str) -> RegistryError:
    return RegistryError(
        404, 40409, f"Subject '{subject}' does not have subject-level mode configured"
    )


def invalid_version(version: object) -> RegistryError:
    return RegistryError(
        422, 42202,
        f"The specified version '{version}' is not a valid version id. Allowed values are "
        'between [1, 2^31-1] and the string "latest"',
    )  # fmt: skip


def invalid_compatibility_level(level: object) -> RegistryError:
    return RegistryError(
        422, 42203,
        f"Invalid compatibility level {level!r}. Valid values are none, backward, forward, full, "
        "backward_transitive, forward_transitive, and full_transitive",
    )  # fmt: skip


def invalid_mode(mode: object) -> RegistryError:
    return RegistryError(
        422, 42204,
        f"Invalid mode {mode!r}. Valid values are READWRITE, READONLY, READONLY_OVERRIDE, and "
        "IMPORT",
    )  # fmt: skip


def operation_not_permitted(message: str) -> RegistryError:
    return RegistryError(422, 42205, message)


def reference_exists(message: str) -> RegistryError:
    return RegistryError(422, 42206, message)


def already_exists(message: str) -> RegistryError:
    """IMPORT mode: the id or version already holds another schema."""
    return RegistryError(422, 42207, message)


def invalid_subject(subject: str) -> RegistryError:
    return RegistryError(422, 42208, f"The specified subject '{subject}' is not valid.")


def store_error(message: str) -> RegistryError:
    return RegistryError(500, 50001, message)


def store_timeout(message: str) -> RegistryError:
    return RegistryError(500, 50002, message)


def bad_request(status: int, message: str) -> RegistryError:
    """An HTTP-level refusal (a body that is not JSON, an unknown route or method): the HTTP
    status doubles as the error code, as Confluent answers it."""
    return RegistryError(status, status, message)


def forwarding_failed(message: str) -> RegistryError:
    return RegistryError(500, 50003, message)


def unknown_leader(message: str) -> RegistryError:
    return RegistryError(500, 50004, message)

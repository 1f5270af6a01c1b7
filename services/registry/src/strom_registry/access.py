"""Who may use the REST API: HTTP Basic credentials checked against Strom's SCRAM users, and
subjects authorized through the Topic ACLs of the topic they describe.

A subject named as Confluent's default ``TopicNameStrategy`` names them, ``<topic>-key`` or
``<topic>-value``, belongs to topic ``<topic>``; any other subject (``RecordNameStrategy``,
hand-picked names) to the topic of the same name, so an ACL on that literal name or a
PREFIXED one covers it. The operation on that topic:

- reading a subject (its versions, schemas, lookup, a compatibility check): ``DESCRIBE``,
  which ``READ`` and ``WRITE`` imply, so consumers and producers of the topic both may;
- registering a schema: ``WRITE``; deleting versions or the subject: ``DELETE``;
- reading / changing its compatibility or mode: ``DESCRIBE_CONFIGS`` / ``ALTER_CONFIGS``;
- the global compatibility and mode: ``DESCRIBE_CONFIGS`` / ``ALTER_CONFIGS`` on the cluster;
- lists (``/subjects``, ``/schemas``, the subjects and versions of an id) show only subjects
  the caller may describe; a schema by id needs ``DESCRIBE`` on some subject using it.

Super users (``super.users``) may do everything. Without the authorizer every authenticated
caller may do everything; without SASL (``PLAINTEXT``, ``SSL``) nobody is asked to log in.
The Basic credentials are read and checked by the shared HTTP layer (``strom_server.http.auth``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from strom.security.acl import Operation, ResourceType
from strom_registry.errors import RegistryError
from strom_server.http.auth import (
    ANONYMOUS,
    BasicAuth,
    CredentialCheck,
    Unauthenticated,
    basic_challenge,
)
from strom_server.security import audit
from strom_server.security.authorizer import Authorizer

__all__ = [
    "ANONYMOUS",
    "CHALLENGE",
    "CLUSTER",
    "Access",
    "forbidden",
    "subject_topic",
    "unauthorized",
]

#: The ``WWW-Authenticate`` header of every 401 (HTTP Basic, the registry's realm).
REALM = "strom-registry"
CHALLENGE = basic_challenge(REALM)

#: Kafka's name of the cluster resource.
CLUSTER = "kafka-cluster"


def subject_topic(subject: str) -> str:
    """The topic whose ACLs govern ``subject`` (module docstring)."""
    for suffix in ("-key", "-value"):
        if subject.endswith(suffix) and len(subject) > len(suffix):
            return subject[: -len(suffix)]
    return subject


def unauthorized(message: str = "Unauthorized") -> RegistryError:
    """401, as Confluent answers a request without valid credentials."""
    return RegistryError(401, 401, message)


def forbidden(principal: str, operation: Operation, what: str) -> RegistryError:
    """403 (40301), as Confluent answers an operation the caller may not do."""
    return RegistryError(403, 40301, f"{principal} is denied operation {operation} on {what}")


@dataclass
class Access:
    """Authentication (``passwords``; None: none asked) and authorization (``authorizer``;
    None: every caller may do everything) of REST requests."""

    passwords: CredentialCheck | None = None
    authorizer: Authorizer | None = None

    @property
    def open(self) -> bool:
        return self.passwords is None and self.authorizer is None

    async def principal(self, authorization: str | None, host: str) -> str:
        """The caller's principal from its ``Authorization`` header (401 when required and
        missing or wrong)."""
        try:
            return await BasicAuth(self.passwords, REALM).principal(authorization, host)
        except Unauthenticated as exc:
            raise unauthorized(exc.message) from None

    def may(self, principal: str, host: str, operation: Operation, subject: str | None) -> bool:
        """May the caller do ``operation`` on ``subject`` (None: the global settings)?"""
        if self.authorizer is None:
            return True
        if subject is None:
            return self.authorizer.authorize(
                principal, host, operation, ResourceType.CLUSTER, CLUSTER
            )
        topic = subject_topic(subject)
        return self.authorizer.authorize(principal, host, operation, ResourceType.TOPIC, topic)

    def check(
        self, principal: str, host: str, operation: Operation, subject: str | None, route: str
    ) -> None:
        """403 (and an audit line) unless the caller may."""
        if self.may(principal, host, operation, subject):
            return
        resource_type = "CLUSTER" if subject is None else "TOPIC"
        name = CLUSTER if subject is None else subject_topic(subject)
        audit.denied(principal, host, operation=str(operation), resource_type=resource_type,
                     name=name, rpc=route)  # fmt: skip
        what = "the global settings" if subject is None else f"Subject: {subject}"
        raise forbidden(principal, operation, what)

    def visible(self, principal: str, host: str, subjects: Iterable[str]) -> list[str]:
        """The subjects the caller may describe."""
        return [s for s in subjects if self.may(principal, host, Operation.DESCRIBE, s)]

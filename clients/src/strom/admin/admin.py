"""``Admin``: topic and cluster administration through the gateway (synchronous).

::

    from strom import Admin, NewTopic

    with Admin(bootstrap_servers="localhost:9092") as admin:
        admin.create_topics([NewTopic("orders", num_partitions=6, replication_factor=3)])
        print(admin.describe_topics(["orders"]))

Every method raises a ``strom.errors`` exception naming the topic, partition or group that
failed; when several fail, the first one is raised (``delete_consumer_groups`` reports each
group's outcome instead). This is a thin facade over ``strom.aio.Admin`` running on the
process's background event loop.
"""

from __future__ import annotations

from collections.abc import Coroutine, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar, Unpack

from strom.admin.aio import Admin as AioAdmin
from strom.admin.config import AdminOptions
from strom.admin.log_dirs import BrokerLogDirs
from strom.admin.transactions import (
    HangingTransaction,
    ProducerState,
    TransactionDescription,
    TransactionListing,
)
from strom.cluster import DEFAULT_BOOTSTRAP_SERVERS, BackgroundLoop
from strom.errors import BrokerResponseError
from strom.security.acl import AclBinding, AclFilter
from strom.security.scram import DEFAULT_ITERATIONS
from strom.types import (
    ClusterDescription,
    ConfigValue,
    ConsumerGroupDescription,
    ConsumerGroupListing,
    NewTopic,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    StagedCommit,
    StagedCommitResult,
    StagedTransaction,
    TopicDescription,
    TopicPartition,
)

__all__ = ["Admin"]

T = TypeVar("T")


class Admin:
    """Administration client; a context manager (closes its channels)."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str] = DEFAULT_BOOTSTRAP_SERVERS,
        **options: Unpack[AdminOptions],
    ) -> None:
        """Options: ``AdminConfig`` (a bad value raises ``ConfigurationError``)."""
        self._bg = BackgroundLoop.shared()

        async def create() -> AioAdmin:
            return AioAdmin(bootstrap_servers, **options)

        self._aio = self._bg.run(create())
        self.config = self._aio.config
        self.bootstrap_servers = self._aio.bootstrap_servers

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self._bg.run(coro)

    # -- cluster ------------------------------------------------------------------------------

    def describe_cluster(self) -> ClusterDescription:
        return self._run(self._aio.describe_cluster())

    def describe_log_dirs(
        self, topics: Sequence[str] = (), broker_ids: Sequence[int] = ()
    ) -> list[BrokerLogDirs]:
        """See ``strom.aio.Admin.describe_log_dirs``."""
        return self._run(self._aio.describe_log_dirs(topics, broker_ids))

    # -- topics -------------------------------------------------------------------------------

    def create_topics(self, new_topics: Sequence[NewTopic], *, validate_only: bool = False) -> None:
        self._run(self._aio.create_topics(new_topics, validate_only=validate_only))

    def delete_topics(self, names: Sequence[str]) -> None:
        self._run(self._aio.delete_topics(names))

    def list_topics(self, *, include_internal: bool = False) -> list[str]:
        return self._run(self._aio.list_topics(include_internal=include_internal))

    def describe_topics(self, names: Sequence[str] | None = None) -> list[TopicDescription]:
        return self._run(self._aio.describe_topics(names))

    def create_partitions(self, new_counts: Mapping[str, int]) -> None:
        self._run(self._aio.create_partitions(new_counts))

    # -- configs ------------------------------------------------------------------------------

    def describe_configs(self, topic: str) -> dict[str, ConfigValue]:
        return self._run(self._aio.describe_configs(topic))

    def alter_configs(
        self,
        topic: str,
        *,
        set_configs: Mapping[str, str] | None = None,
        delete_configs: Sequence[str] = (),
        validate_only: bool = False,
    ) -> None:
        """Incrementally set and/or delete (back to the inherited value) topic configs."""
        self._run(
            self._aio.alter_configs(
                topic,
                set_configs=set_configs,
                delete_configs=delete_configs,
                validate_only=validate_only,
            )
        )

    # -- leaders and reassignment -------------------------------------------------------------

    def elect_leaders(
        self, election_type: str = "preferred", partitions: Sequence[TopicPartition] | None = None
    ) -> dict[TopicPartition, str]:
        """Run a preferred (or unclean) election; returns each partition's outcome code name
        (``NONE`` when a new leader was elected, ``ELECTION_NOT_NEEDED`` when it already led)."""
        return self._run(self._aio.elect_leaders(election_type, partitions))

    def alter_partition_reassignments(
        self,
        reassignments: Mapping[TopicPartition, Sequence[int] | None],
        *,
        throttle_bytes_per_sec: int = 0,
    ) -> None:
        """Move partitions to new replica lists (preferred leader first); None cancels."""
        self._run(
            self._aio.alter_partition_reassignments(
                reassignments, throttle_bytes_per_sec=throttle_bytes_per_sec
            )
        )

    def list_partition_reassignments(self) -> dict[TopicPartition, dict[str, tuple[int, ...]]]:
        return self._run(self._aio.list_partition_reassignments())

    # -- offsets ------------------------------------------------------------------------------

    def list_offsets(
        self,
        specs: Mapping[TopicPartition, str | int],
        *,
        isolation_level: str = "read_uncommitted",
    ) -> dict[TopicPartition, OffsetAndTimestamp]:
        """See ``strom.aio.Admin.list_offsets``."""
        return self._run(self._aio.list_offsets(specs, isolation_level=isolation_level))

    def delete_records(self, offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """See ``strom.aio.Admin.delete_records``."""
        return self._run(self._aio.delete_records(offsets))

    # -- consumer groups ----------------------------------------------------------------------

    def list_consumer_groups(
        self, states: Sequence[str] | None = None
    ) -> list[ConsumerGroupListing]:
        """See ``strom.aio.Admin.list_consumer_groups``."""
        return self._run(self._aio.list_consumer_groups(states))

    def describe_consumer_groups(
        self, group_ids: Sequence[str]
    ) -> dict[str, ConsumerGroupDescription]:
        """See ``strom.aio.Admin.describe_consumer_groups``."""
        return self._run(self._aio.describe_consumer_groups(group_ids))

    def delete_consumer_groups(
        self, group_ids: Sequence[str]
    ) -> dict[str, BrokerResponseError | None]:
        """See ``strom.aio.Admin.delete_consumer_groups``."""
        return self._run(self._aio.delete_consumer_groups(group_ids))

    def list_consumer_group_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition] | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """See ``strom.aio.Admin.list_consumer_group_offsets``."""
        return self._run(self._aio.list_consumer_group_offsets(group_id, partitions))

    def alter_consumer_group_offsets(
        self, group_id: str, offsets: Mapping[TopicPartition, OffsetAndMetadata | int]
    ) -> None:
        """See ``strom.aio.Admin.alter_consumer_group_offsets``."""
        self._run(self._aio.alter_consumer_group_offsets(group_id, offsets))

    def delete_consumer_group_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition]
    ) -> None:
        """See ``strom.aio.Admin.delete_consumer_group_offsets``."""
        self._run(self._aio.delete_consumer_group_offsets(group_id, partitions))

    # -- life cycle ---------------------------------------------------------------------------

    # -- transactions (see strom.aio.Admin) --------------------------------------------------

    def list_transactions(
        self,
        *,
        states: Sequence[str] | None = None,
        producer_ids: Sequence[int] | None = None,
        duration_ms: int = 0,
        transactional_id_prefix: str | None = None,
    ) -> list[TransactionListing]:
        return self._run(
            self._aio.list_transactions(
                states=states,
                producer_ids=producer_ids,
                duration_ms=duration_ms,
                transactional_id_prefix=transactional_id_prefix,
            )
        )

    def describe_transactions(
        self, transactional_ids: Sequence[str]
    ) -> dict[str, TransactionDescription]:
        return self._run(self._aio.describe_transactions(transactional_ids))

    def describe_producers(
        self, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, list[ProducerState]]:
        return self._run(self._aio.describe_producers(partitions))

    def find_hanging_transactions(
        self,
        partitions: Sequence[TopicPartition] | None = None,
        *,
        max_transaction_timeout_ms: int = 15 * 60 * 1000,
    ) -> list[HangingTransaction]:
        return self._run(
            self._aio.find_hanging_transactions(
                partitions, max_transaction_timeout_ms=max_transaction_timeout_ms
            )
        )

    def abort_transaction(
        self, transactional_id: str, *, wait_timeout_ms: int | None = None
    ) -> TransactionDescription:
        return self._run(
            self._aio.abort_transaction(transactional_id, wait_timeout_ms=wait_timeout_ms)
        )

    # -- staged transactions (see strom.aio.Admin) -------------------------------------------

    def commit_staged_transactions(
        self,
        commit_id: str,
        sequence: int,
        members: Sequence[StagedTransaction],
        metadata: bytes = b"",
    ) -> StagedCommitResult:
        """Commit staged transactions as one decision of ``commit_id`` at ``sequence``."""
        return self._run(
            self._aio.commit_staged_transactions(commit_id, sequence, members, metadata)
        )

    def describe_staged_commit(self, commit_id: str) -> StagedCommit | None:
        return self._run(self._aio.describe_staged_commit(commit_id))

    def abort_staged_transactions(self, members: Sequence[StagedTransaction]) -> None:
        """Abort staged transactions with their own identities (ended ones are skipped)."""
        self._run(self._aio.abort_staged_transactions(members))

    # -- users and ACLs (docs/security.md) ----------------------------------------------------

    def upsert_scram_user(
        self,
        name: str,
        password: str,
        *,
        mechanism: str = "SCRAM-SHA-256",
        iterations: int = DEFAULT_ITERATIONS,
    ) -> None:
        """Create the SCRAM user ``name`` or change its password."""
        self._run(
            self._aio.upsert_scram_user(name, password, mechanism=mechanism, iterations=iterations)
        )

    def delete_scram_user(self, name: str, *, mechanism: str = "") -> None:
        """Delete the user (or only its ``mechanism`` credential)."""
        self._run(self._aio.delete_scram_user(name, mechanism=mechanism))

    def describe_scram_users(self, names: Sequence[str] = ()) -> dict[str, list[tuple[str, int]]]:
        """Users (every one when ``names`` is empty) -> [(mechanism, iterations)]."""
        return self._run(self._aio.describe_scram_users(names))

    def create_acls(self, acls: Sequence[AclBinding]) -> None:
        """Create ACLs."""
        self._run(self._aio.create_acls(acls))

    def delete_acls(self, acl_filter: AclFilter | AclBinding) -> list[AclBinding]:
        """Delete the ACLs the filter (or the one binding) matches; returns them."""
        return self._run(self._aio.delete_acls(acl_filter))

    def describe_acls(self, acl_filter: AclFilter | None = None) -> list[AclBinding]:
        """The ACLs the filter matches (every one without it)."""
        return self._run(self._aio.describe_acls(acl_filter))

    def close(self) -> None:
        self._run(self._aio.close())

    def __enter__(self) -> Admin:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

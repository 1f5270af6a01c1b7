"""The coordinator process without a cluster: rendezvous placement of offsets partitions, the
transactional ids, and the settings (Kafka names, GroupConfig built from them)."""

from __future__ import annotations

import pytest

from strom.errors import ConfigurationError
from strom_coordinator.config import DEFAULT_LISTEN, CoordinatorConfig
from strom_coordinator.group.config import GroupConfig
from strom_coordinator.runtime.ownership import preferred, transaction_state_id, transactional_id
from strom_server.runtime.config import load_config


def test_placement_is_deterministic_and_spreads_partitions() -> None:
    live = {1, 2, 3}
    first = {p: preferred(live, p) for p in range(50)}
    assert first == {p: preferred(frozenset({3, 2, 1}), p) for p in range(50)}
    counts = {c: sum(1 for owner in first.values() if owner == c) for c in live}
    assert all(count >= 5 for count in counts.values()), counts
    assert preferred(set(), 0) is None


def test_a_joining_or_leaving_coordinator_moves_only_its_partitions() -> None:
    before = {p: preferred({1, 2}, p) for p in range(50)}
    after = {p: preferred({1, 2, 3}, p) for p in range(50)}
    moved = {p for p in range(50) if before[p] != after[p]}
    assert moved and all(after[p] == 3 for p in moved)
    without_two = {p: preferred({1, 3}, p) for p in range(50)}
    changed = {p for p in range(50) if after[p] != without_two[p]}
    assert changed == {p for p in range(50) if after[p] == 2}


def test_transactional_ids_name_the_partition() -> None:
    assert transactional_id(7) == "__strom_coordinator-offsets-7"
    assert transactional_id(7) != transactional_id(17)
    assert transaction_state_id(7) == "__strom_coordinator-transactions-7"


def test_transaction_settings_have_kafka_names_and_defaults() -> None:
    config = load_config(CoordinatorConfig, [])
    assert config.transaction_state_log_num_partitions == 50
    assert config.transaction_state_log_replication_factor == 3
    assert config.transaction_max_timeout_ms == 900_000
    assert config.transaction_abort_timed_out_transaction_cleanup_interval_ms == 10_000
    assert config.transactional_id_expiration_ms == 604_800_000
    changed = load_config(
        CoordinatorConfig,
        [
            "--transaction.state.log.num.partitions", "6",
            "--transaction-abort-timed-out-transaction-cleanup-interval-ms", "200",
            "--transactional.id.expiration.ms", "1000",
        ],
    )  # fmt: skip
    assert changed.transaction_state_log_num_partitions == 6
    assert changed.transaction_abort_timed_out_transaction_cleanup_interval_ms == 200
    assert changed.transactional_id_expiration_ms == 1000


def test_settings_have_kafka_names_and_defaults() -> None:
    config = load_config(CoordinatorConfig, [])
    assert config.listen == DEFAULT_LISTEN == "127.0.0.1:9098"
    assert config.bootstrap_servers == "127.0.0.1:9092"
    assert (config.offsets_topic_num_partitions, config.offsets_topic_replication_factor) == (50, 3)
    assert config.offsets_topic_segment_bytes == 100 * 1024 * 1024
    assert config.offsets_commit_timeout_ms == 5000
    assert config.offsets_retention_check_interval_ms == 600_000
    assert config.group_config() == GroupConfig()
    assert config.lease_ttl_s == 9


def test_group_settings_reach_the_group_config() -> None:
    config = load_config(
        CoordinatorConfig,
        [
            "--coordinator-id", "4",
            "--group.initial.rebalance.delay.ms", "0",
            "--group-min-session-timeout-ms", "500",
            "--group.max.size", "10",
            "--offsets.retention.minutes", "60",
            "--offset.metadata.max.bytes", "16",
            "--coordinator.session.timeout.ms", "2500",
        ],
    )  # fmt: skip
    assert config.coordinator_id == 4
    assert config.group_config() == GroupConfig(
        group_min_session_timeout_ms=500,
        group_initial_rebalance_delay_ms=0,
        group_max_size=10,
        offsets_retention_minutes=60,
        offset_metadata_max_bytes=16,
    )
    assert config.lease_ttl_s == 2  # etcd leases count whole seconds


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ConfigurationError):
        load_config(CoordinatorConfig, ["--offsets.topic.num.partitions", "0"])
    with pytest.raises(ConfigurationError):
        load_config(CoordinatorConfig, ["--advertised-listen", "nohost"])
    with pytest.raises(ConfigurationError):
        load_config(CoordinatorConfig, ["--bootstrap-servers", " , "])

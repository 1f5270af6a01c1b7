"""Admin group APIs and ``strom groups list|describe|delete|reset-offsets`` against a real
cluster with two coordinators. Tests run in file order on one module-scoped cluster: the
lagging group's offsets move from test to test."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest
from cluster_testkit import LocalCluster, assert_ok, assert_one_line_error
from gateway_groups_testkit import GroupMember, create_topic, gateway_stub

from strom.errors import (
    BrokerResponseError,
    GroupIdNotFoundError,
    NonEmptyGroupError,
)
from strom.types import ConsumerGroupListing, NodeInfo, OffsetAndMetadata, TopicPartition

pytestmark = pytest.mark.integration

TOPIC = "lagged"
P0, P1 = TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)
GROUP = "lagging"


def committed(cluster: LocalCluster, group_id: str = GROUP) -> dict[TopicPartition, int]:
    with cluster.admin() as admin:
        return {tp: om.offset for tp, om in admin.list_consumer_group_offsets(group_id).items()}


def lag_rows(cluster: LocalCluster, group_id: str = GROUP) -> dict[int, dict[str, object]]:
    described = assert_ok(cluster.strom("groups", "describe", group_id, "--json")).json()
    return {row["partition"]: row for row in described["partitions"]}


def active_member(cluster: LocalCluster, group_id: str) -> GroupMember:
    member = GroupMember(gateway_stub(cluster), group_id, [TOPIC], [P0, P1], client_id="cli-test")
    assert member.start() == [P0, P1]
    return member


# -- Admin ------------------------------------------------------------------------------------


def test_admin_offsets_and_listing(groups_cluster: LocalCluster) -> None:
    with groups_cluster.admin() as admin:
        create_topic(admin, TOPIC, 2)
        groups_cluster.produce(TOPIC, 0, [b"r%d" % i for i in range(10)])
        groups_cluster.produce(TOPIC, 1, [b"s%d" % i for i in range(4)])
        admin.alter_consumer_group_offsets(GROUP, {P0: 6, P1: OffsetAndMetadata(4, "meta")})
        assert admin.list_consumer_group_offsets(GROUP) == {
            P0: OffsetAndMetadata(6, ""),
            P1: OffsetAndMetadata(4, "meta"),
        }
        assert admin.list_consumer_group_offsets(GROUP, [P1]) == {P1: OffsetAndMetadata(4, "meta")}
        assert ConsumerGroupListing(GROUP, "", "Empty") in admin.list_consumer_groups()
        assert GROUP in {g.group_id for g in admin.list_consumer_groups(["Empty"])}
        assert GROUP not in {g.group_id for g in admin.list_consumer_groups(["Stable"])}
        described = admin.describe_consumer_groups([GROUP, "never-seen"])
        assert described[GROUP].state == "Empty" and described[GROUP].members == ()
        assert described[GROUP].is_simple_consumer_group
        assert isinstance(described[GROUP].coordinator, NodeInfo)
        assert described["never-seen"].state == "Dead"


def test_admin_describe_members_and_refusals(groups_cluster: LocalCluster) -> None:
    member = active_member(groups_cluster, "admin-active")
    try:
        with groups_cluster.admin() as admin:
            described = admin.describe_consumer_groups(["admin-active"])["admin-active"]
            assert described.state == "Stable" and described.partition_assignor == "range"
            assert not described.is_simple_consumer_group
            (m,) = described.members
            assert m.member_id == member.member_id and m.client_id == "cli-test"
            assert m.group_instance_id is None
            assert m.assignment.topic_partitions == (P0, P1)
            with pytest.raises(BrokerResponseError):
                admin.alter_consumer_group_offsets("admin-active", {P0: 1})
            admin.alter_consumer_group_offsets("admin-deletable", {P0: 1})
            outcome = admin.delete_consumer_groups(
                ["admin-active", "admin-nobody", "admin-deletable"]
            )
            assert isinstance(outcome["admin-active"], NonEmptyGroupError)
            assert isinstance(outcome["admin-nobody"], GroupIdNotFoundError)
            assert outcome["admin-deletable"] is None
            assert admin.list_consumer_group_offsets("admin-deletable") == {}
    finally:
        member.leave()


def test_admin_delete_offsets(groups_cluster: LocalCluster) -> None:
    with groups_cluster.admin() as admin:
        admin.alter_consumer_group_offsets("admin-partial", {P0: 3, P1: 2})
        admin.delete_consumer_group_offsets("admin-partial", [P1])
        assert admin.list_consumer_group_offsets("admin-partial") == {P0: OffsetAndMetadata(3)}


# -- strom groups list / describe / delete ----------------------------------------------------


def test_cli_list(groups_cluster: LocalCluster) -> None:
    listed = assert_ok(groups_cluster.strom("groups", "list", "--json")).json()
    assert {"group_id": GROUP, "protocol_type": "", "state": "Empty"} in listed
    table = assert_ok(groups_cluster.strom("groups", "list", "--state", "Stable")).stdout
    assert table.split()[:3] == ["GROUP", "STATE", "PROTOCOL-TYPE"] and GROUP not in table


def test_cli_describe_lag_and_lead(groups_cluster: LocalCluster) -> None:
    rows = lag_rows(groups_cluster)
    assert {k: rows[0][k] for k in ("committed_offset", "log_end_offset", "lag",
                                    "log_start_offset", "lead")} == {
        "committed_offset": 6, "log_end_offset": 10, "lag": 4, "log_start_offset": 0, "lead": 6,
    }  # fmt: skip
    assert (rows[1]["committed_offset"], rows[1]["lag"], rows[1]["lead"]) == (4, 0, 4)
    with groups_cluster.admin() as admin:
        admin.delete_records({P0: 2})
    rows = lag_rows(groups_cluster)
    assert (rows[0]["log_start_offset"], rows[0]["lead"], rows[0]["lag"]) == (2, 4, 4)
    text = assert_ok(groups_cluster.strom("groups", "describe", GROUP)).stdout.splitlines()
    assert text[0].startswith(f"Group: {GROUP}  State: Empty")
    assert text[1].split() == [
        "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "LOG-START-OFFSET",
        "LEAD", "CONSUMER-ID", "HOST", "CLIENT-ID",
    ]  # fmt: skip
    assert text[2].split() == [TOPIC, "0", "6", "10", "4", "2", "4", "-", "-", "-"]


def test_cli_describe_members(groups_cluster: LocalCluster) -> None:
    member = active_member(groups_cluster, "cli-active")
    try:
        rows = lag_rows(groups_cluster, "cli-active")
        assert rows[0]["member_id"] == member.member_id and rows[0]["committed_offset"] is None
        shown = assert_ok(
            groups_cluster.strom("groups", "describe", "cli-active", "--members", "--json")
        ).json()
        assert shown["state"] == "Stable"
        (m,) = shown["members"]
        assert m["member_id"] == member.member_id and m["client_id"] == "cli-test"
        table = assert_ok(groups_cluster.strom("groups", "describe", "cli-active", "--members"))
        assert f"{TOPIC}:0,1" in table.stdout and member.member_id in table.stdout
        refused = groups_cluster.strom(
            "groups", "reset-offsets", "--group", "cli-active", "--all-topics", "--to-earliest"
        )
        assert_one_line_error(refused, "cli-active", "active member")
        refused = groups_cluster.strom("groups", "delete", "cli-active")
        assert_one_line_error(refused, "cli-active", "NON_EMPTY_GROUP")
    finally:
        member.leave()


def test_cli_describe_and_delete_errors(groups_cluster: LocalCluster) -> None:
    assert_one_line_error(
        groups_cluster.strom("groups", "describe", "no-such-group"), "no-such-group", "not exist"
    )
    assert_one_line_error(
        groups_cluster.strom("groups", "delete", "no-such-group"), "GROUP_ID_NOT_FOUND"
    )
    with groups_cluster.admin() as admin:
        admin.alter_consumer_group_offsets("cli-deletable", {P0: 1})
    deleted = assert_ok(groups_cluster.strom("groups", "delete", "cli-deletable"))
    assert deleted.stdout.strip() == "Deleted: cli-deletable."
    assert committed(groups_cluster, "cli-deletable") == {}


# -- strom groups reset-offsets ---------------------------------------------------------------


def reset(cluster: LocalCluster, *args: str) -> dict[int, tuple[int | None, int]]:
    result = assert_ok(cluster.strom("groups", "reset-offsets", "--group", GROUP, *args, "--json"))
    return {
        p["partition"]: (p["current_offset"], p["new_offset"]) for p in result.json()["partitions"]
    }


def test_reset_dry_run_changes_nothing(groups_cluster: LocalCluster) -> None:
    before = committed(groups_cluster)
    assert before == {P0: 6, P1: 4}
    assert reset(groups_cluster, "--all-topics", "--to-earliest") == {0: (6, 2), 1: (4, 0)}
    assert reset(groups_cluster, "--topic", TOPIC, "--to-latest", "--dry-run") == {
        0: (6, 10),
        1: (4, 4),
    }
    text = assert_ok(
        groups_cluster.strom("groups", "reset-offsets", "--group", GROUP, "--all-topics",
                             "--to-earliest")
    ).stdout  # fmt: skip
    assert "dry run" in text and f"{GROUP}  {TOPIC}" in text
    assert committed(groups_cluster) == before


def test_reset_each_mode(groups_cluster: LocalCluster) -> None:
    assert reset(groups_cluster, "--all-topics", "--to-earliest", "--execute") == {
        0: (6, 2),
        1: (4, 0),
    }
    assert committed(groups_cluster) == {P0: 2, P1: 0}
    assert reset(groups_cluster, "--topic", f"{TOPIC}:1", "--to-latest", "--execute") == {1: (0, 4)}
    assert committed(groups_cluster) == {P0: 2, P1: 4}
    # --to-offset is clamped to [log start, log end] per partition.
    assert reset(groups_cluster, "--topic", TOPIC, "--to-offset", "7", "--execute") == {
        0: (2, 7),
        1: (4, 4),
    }
    assert reset(groups_cluster, "--topic", f"{TOPIC}:0", "--to-offset", "1", "--execute") == {
        0: (7, 2)
    }
    assert reset(groups_cluster, "--all-topics", "--shift-by", "5", "--execute") == {
        0: (2, 7),
        1: (4, 4),
    }
    assert reset(groups_cluster, "--all-topics", "--shift-by", "-6", "--execute") == {
        0: (7, 2),
        1: (4, 0),
    }
    assert committed(groups_cluster) == {P0: 2, P1: 0}
    # --to-datetime: the first offset at or after the time; none after it -> the log end.
    time.sleep(0.01)  # a time (ms) after every record so far
    since = datetime.now(UTC).isoformat(timespec="milliseconds")
    groups_cluster.produce(TOPIC, 1, [b"late-1", b"late-2"])
    assert reset(groups_cluster, "--all-topics", "--to-datetime", since, "--execute") == {
        0: (2, 10),
        1: (0, 4),
    }
    assert committed(groups_cluster) == {P0: 10, P1: 4}

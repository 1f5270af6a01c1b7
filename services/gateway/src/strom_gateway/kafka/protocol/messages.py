"""The Kafka messages Strom's listener speaks: one declaration per API, request and response.

Written from Kafka's protocol guide and its message definitions (field order, the versions
each field exists in, nullability, tagged fields). ``SERVED`` lists the version range Strom
answers for each API: the ranges clients negotiate from ApiVersions. Versions below a range
need the old (v0/v1) message format or semantics Strom lacks; versions above it carry topic
ids instead of names in data requests, or transaction/group protocols Strom does not speak
(docs/kafka-compatibility.md).
"""

from __future__ import annotations

from strom_gateway.kafka.protocol.schema import Api, Field, Struct, arr, f, struct

__all__ = ["APIS", "by_key"]

# -- headers ------------------------------------------------------------------------------------

# The request header (api_key int16, api_version int16, correlation_id int32, client_id
# nullable int16-length string, then tagged fields in flexible versions) and the response
# header (correlation_id, then tagged fields) are read and written by ``frames``.


def _api(  # noqa: PLR0917 (read as one row per API)
    key: int,
    name: str,
    served: tuple[int, int],
    first_flexible: int | None,
    request: list[Field],
    response: list[Field],
) -> Api:
    return Api(
        key,
        name,
        served[0],
        served[1],
        first_flexible,
        Struct(f"{name}Request", tuple(request)),
        Struct(f"{name}Response", tuple(response)),
    )


_NODE_ENDPOINT = [f("node_id", "int32"), f("host", "string"), f("port", "int32"),
                  f("rack", "string", null="0+")]  # fmt: skip
_LEADER_AND_EPOCH = [f("leader_id", "int32", default=-1), f("leader_epoch", "int32", default=-1)]

# -- data ---------------------------------------------------------------------------------------

PRODUCE = _api(
    0, "Produce", (3, 10), 9,
    [
        f("transactional_id", "string", "3+", null="3+"),
        f("acks", "int16"),
        f("timeout_ms", "int32"),
        arr("topic_data", [
            f("name", "string"),
            arr("partition_data", [f("index", "int32"), f("records", "records", null="0+")]),
        ]),
    ],
    [
        arr("responses", [
            f("name", "string"),
            arr("partition_responses", [
                f("index", "int32"),
                f("error_code", "int16"),
                f("base_offset", "int64"),
                f("log_append_time_ms", "int64", "2+", default=-1),
                f("log_start_offset", "int64", "5+", default=-1),
                arr("record_errors", [
                    f("batch_index", "int32"),
                    f("batch_index_error_message", "string", null="8+"),
                ], "8+"),
                f("error_message", "string", "8+", null="8+"),
                struct("current_leader", _LEADER_AND_EPOCH, "10+", tag=0),
            ]),
        ]),
        f("throttle_time_ms", "int32", "1+"),
        arr("node_endpoints", _NODE_ENDPOINT, "10+", tag=0),
    ],
)  # fmt: skip

FETCH = _api(
    1, "Fetch", (4, 12), 12,
    [
        f("cluster_id", "string", "12+", null="12+", tag=0),
        f("replica_id", "int32"),
        f("max_wait_ms", "int32"),
        f("min_bytes", "int32"),
        f("max_bytes", "int32", "3+", default=0x7FFFFFFF),
        f("isolation_level", "int8", "4+"),
        f("session_id", "int32", "7+"),
        f("session_epoch", "int32", "7+", default=-1),
        arr("topics", [
            f("topic", "string"),
            arr("partitions", [
                f("partition", "int32"),
                f("current_leader_epoch", "int32", "9+", default=-1),
                f("fetch_offset", "int64"),
                f("last_fetched_epoch", "int32", "12+", default=-1),
                f("log_start_offset", "int64", "5+", default=-1),
                f("partition_max_bytes", "int32"),
            ]),
        ]),
        arr("forgotten_topics_data", [f("topic", "string"), arr("partitions", "int32")], "7+"),
        f("rack_id", "string", "11+"),
    ],
    [
        f("throttle_time_ms", "int32", "1+"),
        f("error_code", "int16", "7+"),
        f("session_id", "int32", "7+"),
        arr("responses", [
            f("topic", "string"),
            arr("partitions", [
                f("partition_index", "int32"),
                f("error_code", "int16"),
                f("high_watermark", "int64"),
                f("last_stable_offset", "int64", "4+", default=-1),
                f("log_start_offset", "int64", "5+", default=-1),
                struct("diverging_epoch", [f("epoch", "int32", default=-1),
                                           f("end_offset", "int64", default=-1)], "12+", tag=0),
                struct("current_leader", _LEADER_AND_EPOCH, "12+", tag=1),
                arr("aborted_transactions", [f("producer_id", "int64"),
                                             f("first_offset", "int64")], "4+", null="4+"),
                f("preferred_read_replica", "int32", "11+", default=-1),
                f("records", "records", null="0+"),
            ]),
        ]),
    ],
)  # fmt: skip

LIST_OFFSETS = _api(
    2, "ListOffsets", (1, 7), 6,
    [
        f("replica_id", "int32"),
        f("isolation_level", "int8", "2+"),
        arr("topics", [
            f("name", "string"),
            arr("partitions", [
                f("partition_index", "int32"),
                f("current_leader_epoch", "int32", "4+", default=-1),
                f("timestamp", "int64"),
            ]),
        ]),
    ],
    [
        f("throttle_time_ms", "int32", "2+"),
        arr("topics", [
            f("name", "string"),
            arr("partitions", [
                f("partition_index", "int32"),
                f("error_code", "int16"),
                f("timestamp", "int64", "1+", default=-1),
                f("offset", "int64", "1+", default=-1),
                f("leader_epoch", "int32", "4+", default=-1),
            ]),
        ]),
    ],
)  # fmt: skip

METADATA = _api(
    3, "Metadata", (0, 12), 9,
    [
        arr("topics", [f("topic_id", "uuid", "10+"), f("name", "string", null="10+")],
            null="1+"),
        f("allow_auto_topic_creation", "bool", "4+", default=True),
        f("include_cluster_authorized_operations", "bool", "8-10"),
        f("include_topic_authorized_operations", "bool", "8+"),
    ],
    [
        f("throttle_time_ms", "int32", "3+"),
        arr("brokers", [
            f("node_id", "int32"),
            f("host", "string"),
            f("port", "int32"),
            f("rack", "string", "1+", null="1+"),
        ]),
        f("cluster_id", "string", "2+", null="2+"),
        f("controller_id", "int32", "1+", default=-1),
        arr("topics", [
            f("error_code", "int16"),
            f("name", "string", null="12+"),
            f("topic_id", "uuid", "10+"),
            f("is_internal", "bool", "1+"),
            arr("partitions", [
                f("error_code", "int16"),
                f("partition_index", "int32"),
                f("leader_id", "int32"),
                f("leader_epoch", "int32", "7+", default=-1),
                arr("replica_nodes", "int32"),
                arr("isr_nodes", "int32"),
                arr("offline_replicas", "int32", "5+"),
            ]),
            f("topic_authorized_operations", "int32", "8+", default=-(2**31)),
        ]),
        f("cluster_authorized_operations", "int32", "8-10", default=-(2**31)),
    ],
)  # fmt: skip

OFFSET_FOR_LEADER_EPOCH = _api(
    23, "OffsetForLeaderEpoch", (2, 4), 4,
    [
        f("replica_id", "int32", "3+", default=-2),
        arr("topics", [
            f("topic", "string"),
            arr("partitions", [
                f("partition", "int32"),
                f("current_leader_epoch", "int32", default=-1),
                f("leader_epoch", "int32"),
            ]),
        ]),
    ],
    [
        f("throttle_time_ms", "int32"),
        arr("topics", [
            f("topic", "string"),
            arr("partitions", [
                f("error_code", "int16"),
                f("partition", "int32"),
                f("leader_epoch", "int32", default=-1),
                f("end_offset", "int64", default=-1),
            ]),
        ]),
    ],
)  # fmt: skip

DELETE_RECORDS = _api(
    21, "DeleteRecords", (0, 2), 2,
    [
        arr("topics", [
            f("name", "string"),
            arr("partitions", [f("partition_index", "int32"), f("offset", "int64")]),
        ]),
        f("timeout_ms", "int32"),
    ],
    [
        f("throttle_time_ms", "int32"),
        arr("topics", [
            f("name", "string"),
            arr("partitions", [f("partition_index", "int32"), f("low_watermark", "int64"),
                               f("error_code", "int16")]),
        ]),
    ],
)  # fmt: skip

# -- consumer groups -----------------------------------------------------------------------------

OFFSET_COMMIT = _api(
    8, "OffsetCommit", (2, 9), 8,
    [
        f("group_id", "string"),
        f("generation_id", "int32", "1+", default=-1),
        f("member_id", "string", "1+"),
        f("group_instance_id", "string", "7+", null="7+"),
        f("retention_time_ms", "int64", "2-4", default=-1),
        arr("topics", [
            f("name", "string"),
            arr("partitions", [
                f("partition_index", "int32"),
                f("committed_offset", "int64"),
                f("committed_leader_epoch", "int32", "6+", default=-1),
                f("committed_metadata", "string", null="0+"),
            ]),
        ]),
    ],
    [
        f("throttle_time_ms", "int32", "3+"),
        arr("topics", [
            f("name", "string"),
            arr("partitions", [f("partition_index", "int32"), f("error_code", "int16")]),
        ]),
    ],
)  # fmt: skip

_OFFSET_FETCH_PARTITION = [
    f("partition_index", "int32"),
    f("committed_offset", "int64"),
    f("committed_leader_epoch", "int32", "5+", default=-1),
    f("metadata", "string", null="0+"),
    f("error_code", "int16"),
]

OFFSET_FETCH = _api(
    9, "OffsetFetch", (1, 8), 6,
    [
        f("group_id", "string", "0-7"),
        arr("topics", [f("name", "string"), arr("partition_indexes", "int32")], "0-7",
            null="2-7"),
        arr("groups", [
            f("group_id", "string"),
            arr("topics", [f("name", "string"), arr("partition_indexes", "int32")],
                null="8+"),
        ], "8+"),
        f("require_stable", "bool", "7+"),
    ],
    [
        f("throttle_time_ms", "int32", "3+"),
        arr("topics", [f("name", "string"), arr("partitions", _OFFSET_FETCH_PARTITION)], "0-7"),
        f("error_code", "int16", "2-7"),
        arr("groups", [
            f("group_id", "string"),
            arr("topics", [f("name", "string"), arr("partitions", _OFFSET_FETCH_PARTITION)]),
            f("error_code", "int16"),
        ], "8+"),
    ],
)  # fmt: skip

FIND_COORDINATOR = _api(
    10, "FindCoordinator", (0, 4), 3,
    [
        f("key", "string", "0-3"),
        f("key_type", "int8", "1+"),
        arr("coordinator_keys", "string", "4+"),
    ],
    [
        f("throttle_time_ms", "int32", "1+"),
        f("error_code", "int16", "0-3"),
        f("error_message", "string", "1-3", null="1-3"),
        f("node_id", "int32", "0-3"),
        f("host", "string", "0-3"),
        f("port", "int32", "0-3"),
        arr("coordinators", [
            f("key", "string"),
            f("node_id", "int32"),
            f("host", "string"),
            f("port", "int32"),
            f("error_code", "int16"),
            f("error_message", "string", null="4+"),
        ], "4+"),
    ],
)  # fmt: skip

JOIN_GROUP = _api(
    11, "JoinGroup", (0, 9), 6,
    [
        f("group_id", "string"),
        f("session_timeout_ms", "int32"),
        f("rebalance_timeout_ms", "int32", "1+", default=-1),
        f("member_id", "string"),
        f("group_instance_id", "string", "5+", null="5+"),
        f("protocol_type", "string"),
        arr("protocols", [f("name", "string"), f("metadata", "bytes")]),
        f("reason", "string", "8+", null="8+"),
    ],
    [
        f("throttle_time_ms", "int32", "2+"),
        f("error_code", "int16"),
        f("generation_id", "int32", default=-1),
        f("protocol_type", "string", "7+", null="7+"),
        f("protocol_name", "string", null="7+"),
        f("leader", "string"),
        f("skip_assignment", "bool", "9+"),
        f("member_id", "string"),
        arr("members", [
            f("member_id", "string"),
            f("group_instance_id", "string", "5+", null="5+"),
            f("metadata", "bytes"),
        ]),
    ],
)  # fmt: skip

HEARTBEAT = _api(
    12, "Heartbeat", (0, 4), 4,
    [
        f("group_id", "string"),
        f("generation_id", "int32"),
        f("member_id", "string"),
        f("group_instance_id", "string", "3+", null="3+"),
    ],
    [f("throttle_time_ms", "int32", "1+"), f("error_code", "int16")],
)  # fmt: skip

LEAVE_GROUP = _api(
    13, "LeaveGroup", (0, 5), 4,
    [
        f("group_id", "string"),
        f("member_id", "string", "0-2"),
        arr("members", [
            f("member_id", "string"),
            f("group_instance_id", "string", null="3+"),
            f("reason", "string", "5+", null="5+"),
        ], "3+"),
    ],
    [
        f("throttle_time_ms", "int32", "1+"),
        f("error_code", "int16"),
        arr("members", [
            f("member_id", "string"),
            f("group_instance_id", "string", null="3+"),
            f("error_code", "int16"),
        ], "3+"),
    ],
)  # fmt: skip

SYNC_GROUP = _api(
    14, "SyncGroup", (0, 5), 4,
    [
        f("group_id", "string"),
        f("generation_id", "int32"),
        f("member_id", "string"),
        f("group_instance_id", "string", "3+", null="3+"),
        f("protocol_type", "string", "5+", null="5+"),
        f("protocol_name", "string", "5+", null="5+"),
        arr("assignments", [f("member_id", "string"), f("assignment", "bytes")]),
    ],
    [
        f("throttle_time_ms", "int32", "1+"),
        f("error_code", "int16"),
        f("protocol_type", "string", "5+", null="5+"),
        f("protocol_name", "string", "5+", null="5+"),
        f("assignment", "bytes"),
    ],
)  # fmt: skip

DESCRIBE_GROUPS = _api(
    15, "DescribeGroups", (0, 5), 5,
    [arr("groups", "string"), f("include_authorized_operations", "bool", "3+")],
    [
        f("throttle_time_ms", "int32", "1+"),
        arr("groups", [
            f("error_code", "int16"),
            f("group_id", "string"),
            f("group_state", "string"),
            f("protocol_type", "string"),
            f("protocol_data", "string"),
            arr("members", [
                f("member_id", "string"),
                f("group_instance_id", "string", "4+", null="4+"),
                f("client_id", "string"),
                f("client_host", "string"),
                f("member_metadata", "bytes"),
                f("member_assignment", "bytes"),
            ]),
            f("authorized_operations", "int32", "3+", default=-(2**31)),
        ]),
    ],
)  # fmt: skip

LIST_GROUPS = _api(
    16, "ListGroups", (0, 4), 3,
    [arr("states_filter", "string", "4+")],
    [
        f("throttle_time_ms", "int32", "1+"),
        f("error_code", "int16"),
        arr("groups", [
            f("group_id", "string"),
            f("protocol_type", "string"),
            f("group_state", "string", "4+"),
        ]),
    ],
)  # fmt: skip

DELETE_GROUPS = _api(
    42, "DeleteGroups", (0, 2), 2,
    [arr("groups_names", "string")],
    [
        f("throttle_time_ms", "int32"),
        arr("results", [f("group_id", "string"), f("error_code", "int16")]),
    ],
)  # fmt: skip

# -- the connection ------------------------------------------------------------------------------

API_VERSIONS = _api(
    18, "ApiVersions", (0, 3), 3,
    [
        f("client_software_name", "string", "3+"),
        f("client_software_version", "string", "3+"),
    ],
    [
        f("error_code", "int16"),
        arr("api_keys", [
            f("api_key", "int16"),
            f("min_version", "int16"),
            f("max_version", "int16"),
        ]),
        f("throttle_time_ms", "int32", "1+"),
    ],
)  # fmt: skip

SASL_HANDSHAKE = _api(
    17, "SaslHandshake", (0, 1), None,
    [f("mechanism", "string")],
    [f("error_code", "int16"), arr("mechanisms", "string")],
)  # fmt: skip

SASL_AUTHENTICATE = _api(
    36, "SaslAuthenticate", (0, 2), 2,
    [f("auth_bytes", "bytes")],
    [
        f("error_code", "int16"),
        f("error_message", "string", null="0+"),
        f("auth_bytes", "bytes"),
        f("session_lifetime_ms", "int64", "1+"),
    ],
)  # fmt: skip

# -- administration ------------------------------------------------------------------------------

CREATE_TOPICS = _api(
    19, "CreateTopics", (2, 7), 5,
    [
        arr("topics", [
            f("name", "string"),
            f("num_partitions", "int32"),
            f("replication_factor", "int16"),
            arr("assignments", [f("partition_index", "int32"), arr("broker_ids", "int32")]),
            arr("configs", [f("name", "string"), f("value", "string", null="0+")]),
        ]),
        f("timeout_ms", "int32", default=60000),
        f("validate_only", "bool", "1+"),
    ],
    [
        f("throttle_time_ms", "int32", "2+"),
        arr("topics", [
            f("name", "string"),
            f("topic_id", "uuid", "7+"),
            f("error_code", "int16"),
            f("error_message", "string", "1+", null="0+"),
            f("topic_config_error_code", "int16", "5+", tag=0),
            f("num_partitions", "int32", "5+", default=-1),
            f("replication_factor", "int16", "5+", default=-1),
            arr("configs", [
                f("name", "string"),
                f("value", "string", null="5+"),
                f("read_only", "bool"),
                f("config_source", "int8", default=-1),
                f("is_sensitive", "bool"),
            ], "5+", null="5+"),
        ]),
    ],
)  # fmt: skip

DELETE_TOPICS = _api(
    20, "DeleteTopics", (1, 5), 4,
    [arr("topic_names", "string"), f("timeout_ms", "int32")],
    [
        f("throttle_time_ms", "int32", "1+"),
        arr("responses", [
            f("name", "string"),
            f("error_code", "int16"),
            f("error_message", "string", "5+", null="5+"),
        ]),
    ],
)  # fmt: skip

DESCRIBE_CONFIGS = _api(
    32, "DescribeConfigs", (1, 4), 4,
    [
        arr("resources", [
            f("resource_type", "int8"),
            f("resource_name", "string"),
            arr("configuration_keys", "string", null="0+"),
        ]),
        f("include_synonyms", "bool", "1+"),
        f("include_documentation", "bool", "3+"),
    ],
    [
        f("throttle_time_ms", "int32"),
        arr("results", [
            f("error_code", "int16"),
            f("error_message", "string", null="0+"),
            f("resource_type", "int8"),
            f("resource_name", "string"),
            arr("configs", [
                f("name", "string"),
                f("value", "string", null="0+"),
                f("read_only", "bool"),
                f("config_source", "int8", "1+", default=-1),
                f("is_sensitive", "bool"),
                arr("synonyms", [f("name", "string"), f("value", "string", null="0+"),
                                 f("source", "int8")], "1+"),
                f("config_type", "int8", "3+"),
                f("documentation", "string", "3+", null="0+"),
            ]),
        ]),
    ],
)  # fmt: skip

_ALTER_CONFIGS_RESPONSE = [
    f("throttle_time_ms", "int32"),
    arr("responses", [
        f("error_code", "int16"),
        f("error_message", "string", null="0+"),
        f("resource_type", "int8"),
        f("resource_name", "string"),
    ]),
]  # fmt: skip

ALTER_CONFIGS = _api(
    33, "AlterConfigs", (0, 2), 2,
    [
        arr("resources", [
            f("resource_type", "int8"),
            f("resource_name", "string"),
            arr("configs", [f("name", "string"), f("value", "string", null="0+")]),
        ]),
        f("validate_only", "bool"),
    ],
    _ALTER_CONFIGS_RESPONSE,
)  # fmt: skip

CREATE_PARTITIONS = _api(
    37, "CreatePartitions", (0, 3), 2,
    [
        arr("topics", [
            f("name", "string"),
            f("count", "int32"),
            arr("assignments", [arr("broker_ids", "int32")], null="0+"),
        ]),
        f("timeout_ms", "int32"),
        f("validate_only", "bool"),
    ],
    [
        f("throttle_time_ms", "int32"),
        arr("results", [
            f("name", "string"),
            f("error_code", "int16"),
            f("error_message", "string", null="0+"),
        ]),
    ],
)  # fmt: skip

INCREMENTAL_ALTER_CONFIGS = _api(
    44, "IncrementalAlterConfigs", (0, 1), 1,
    [
        arr("resources", [
            f("resource_type", "int8"),
            f("resource_name", "string"),
            arr("configs", [f("name", "string"), f("config_operation", "int8"),
                            f("value", "string", null="0+")]),
        ]),
        f("validate_only", "bool"),
    ],
    _ALTER_CONFIGS_RESPONSE,
)  # fmt: skip

DESCRIBE_CLUSTER = _api(
    60, "DescribeCluster", (0, 1), 0,
    [
        f("include_cluster_authorized_operations", "bool"),
        f("endpoint_type", "int8", "1+", default=1),
    ],
    [
        f("throttle_time_ms", "int32"),
        f("error_code", "int16"),
        f("error_message", "string", null="0+"),
        f("endpoint_type", "int8", "1+", default=1),
        f("cluster_id", "string"),
        f("controller_id", "int32", default=-1),
        arr("brokers", [
            f("broker_id", "int32"),
            f("host", "string"),
            f("port", "int32"),
            f("rack", "string", null="0+"),
        ]),
        f("cluster_authorized_operations", "int32", default=-(2**31)),
    ],
)  # fmt: skip

# -- transactions --------------------------------------------------------------------------------

INIT_PRODUCER_ID = _api(
    22, "InitProducerId", (0, 4), 2,
    [
        f("transactional_id", "string", null="0+"),
        f("transaction_timeout_ms", "int32"),
        f("producer_id", "int64", "3+", default=-1),
        f("producer_epoch", "int16", "3+", default=-1),
    ],
    [
        f("throttle_time_ms", "int32"),
        f("error_code", "int16"),
        f("producer_id", "int64", default=-1),
        f("producer_epoch", "int16"),
    ],
)  # fmt: skip

ADD_PARTITIONS_TO_TXN = _api(
    24, "AddPartitionsToTxn", (0, 3), 3,
    [
        f("transactional_id", "string"),
        f("producer_id", "int64"),
        f("producer_epoch", "int16"),
        arr("topics", [f("name", "string"), arr("partitions", "int32")]),
    ],
    [
        f("throttle_time_ms", "int32"),
        arr("results", [
            f("name", "string"),
            arr("results", [f("partition_index", "int32"), f("partition_error_code", "int16")]),
        ]),
    ],
)  # fmt: skip

ADD_OFFSETS_TO_TXN = _api(
    25, "AddOffsetsToTxn", (0, 3), 3,
    [
        f("transactional_id", "string"),
        f("producer_id", "int64"),
        f("producer_epoch", "int16"),
        f("group_id", "string"),
    ],
    [f("throttle_time_ms", "int32"), f("error_code", "int16")],
)  # fmt: skip

END_TXN = _api(
    26, "EndTxn", (0, 3), 3,
    [
        f("transactional_id", "string"),
        f("producer_id", "int64"),
        f("producer_epoch", "int16"),
        f("committed", "bool"),
    ],
    [f("throttle_time_ms", "int32"), f("error_code", "int16")],
)  # fmt: skip

TXN_OFFSET_COMMIT = _api(
    28, "TxnOffsetCommit", (0, 3), 3,
    [
        f("transactional_id", "string"),
        f("group_id", "string"),
        f("producer_id", "int64"),
        f("producer_epoch", "int16"),
        f("generation_id", "int32", "3+", default=-1),
        f("member_id", "string", "3+"),
        f("group_instance_id", "string", "3+", null="3+"),
        arr("topics", [
            f("name", "string"),
            arr("partitions", [
                f("partition_index", "int32"),
                f("committed_offset", "int64"),
                f("committed_leader_epoch", "int32", "2+", default=-1),
                f("committed_metadata", "string", null="0+"),
            ]),
        ]),
    ],
    [
        f("throttle_time_ms", "int32"),
        arr("topics", [
            f("name", "string"),
            arr("partitions", [f("partition_index", "int32"), f("error_code", "int16")]),
        ]),
    ],
)  # fmt: skip

DESCRIBE_PRODUCERS = _api(
    61, "DescribeProducers", (0, 0), 0,
    [arr("topics", [f("name", "string"), arr("partition_indexes", "int32")])],
    [
        f("throttle_time_ms", "int32"),
        arr("topics", [
            f("name", "string"),
            arr("partitions", [
                f("partition_index", "int32"),
                f("error_code", "int16"),
                f("error_message", "string", null="0+"),
                arr("active_producers", [
                    f("producer_id", "int64"),
                    f("producer_epoch", "int32"),
                    f("last_sequence", "int32", default=-1),
                    f("last_timestamp", "int64", default=-1),
                    f("coordinator_epoch", "int32"),
                    f("current_txn_start_offset", "int64", default=-1),
                ]),
            ]),
        ]),
    ],
)  # fmt: skip

DESCRIBE_TRANSACTIONS = _api(
    65, "DescribeTransactions", (0, 0), 0,
    [arr("transactional_ids", "string")],
    [
        f("throttle_time_ms", "int32"),
        arr("transaction_states", [
            f("error_code", "int16"),
            f("transactional_id", "string"),
            f("transaction_state", "string"),
            f("transaction_timeout_ms", "int32"),
            f("transaction_start_time_ms", "int64"),
            f("producer_id", "int64"),
            f("producer_epoch", "int16"),
            arr("topics", [f("topic", "string"), arr("partitions", "int32")]),
        ]),
    ],
)  # fmt: skip

LIST_TRANSACTIONS = _api(
    66, "ListTransactions", (0, 1), 0,
    [
        arr("state_filters", "string"),
        arr("producer_id_filters", "int64"),
        f("duration_filter", "int64", "1+", default=-1),
    ],
    [
        f("throttle_time_ms", "int32"),
        f("error_code", "int16"),
        arr("unknown_state_filters", "string"),
        arr("transaction_states", [
            f("transactional_id", "string"),
            f("producer_id", "int64"),
            f("transaction_state", "string"),
        ]),
    ],
)  # fmt: skip

APIS: tuple[Api, ...] = (
    PRODUCE, FETCH, LIST_OFFSETS, METADATA, OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR,
    JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP, DESCRIBE_GROUPS, LIST_GROUPS, API_VERSIONS,
    CREATE_TOPICS, DELETE_TOPICS, DELETE_RECORDS, INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN,
    ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT, DESCRIBE_CONFIGS, ALTER_CONFIGS,
    CREATE_PARTITIONS, DELETE_GROUPS, INCREMENTAL_ALTER_CONFIGS, DESCRIBE_CLUSTER,
    DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS, OFFSET_FOR_LEADER_EPOCH,
    SASL_HANDSHAKE, SASL_AUTHENTICATE,
)  # fmt: skip

_BY_KEY = {api.key: api for api in APIS}


def by_key(key: int) -> Api | None:
    """The API with this key, when Strom serves it."""
    return _BY_KEY.get(key)

"""Small pieces of the Kafka listener's translation: error codes, topic ids, and that every API
it advertises has a handler."""

from __future__ import annotations

import uuid

import grpc

from strom.errors import ERROR_CODE_METADATA_KEY, ErrorCode
from strom_gateway.kafka.admin_handlers import _topic_id
from strom_gateway.kafka.backend import failure, kafka_code
from strom_gateway.kafka.handlers import HANDLERS
from strom_gateway.kafka.listener import served_versions
from strom_gateway.kafka.protocol.messages import APIS


def test_kafka_codes_are_strom_codes_below_1000() -> None:
    assert kafka_code(ErrorCode.NOT_LEADER_OR_FOLLOWER) == 6
    assert kafka_code(ErrorCode.UNSUPPORTED_VERSION) == 35
    assert kafka_code(ErrorCode.TOPIC_DELETION_IN_PROGRESS) == 3  # UNKNOWN_TOPIC_OR_PARTITION
    assert kafka_code(1999) == -1  # UNKNOWN_SERVER_ERROR


def _rpc_error(status: grpc.StatusCode, trailers: tuple[tuple[str, str], ...] = ()) -> Exception:
    metadata = grpc.aio.Metadata(*trailers)
    return grpc.aio.AioRpcError(status, grpc.aio.Metadata(), metadata, details="boom")


def test_a_failed_call_reports_the_servers_own_code_else_the_statuss() -> None:
    unavailable = ErrorCode.COORDINATOR_NOT_AVAILABLE
    trailer = ((ERROR_CODE_METADATA_KEY, str(int(ErrorCode.TOPIC_ALREADY_EXISTS))),)
    exact = failure(_rpc_error(grpc.StatusCode.INVALID_ARGUMENT, trailer), unavailable)
    assert exact.code == ErrorCode.TOPIC_ALREADY_EXISTS
    timed_out = failure(_rpc_error(grpc.StatusCode.DEADLINE_EXCEEDED), unavailable)
    assert timed_out.code == ErrorCode.REQUEST_TIMED_OUT
    assert timed_out.message == "DEADLINE_EXCEEDED: boom"
    assert failure(_rpc_error(grpc.StatusCode.UNAVAILABLE), unavailable).code == unavailable
    assert failure(_rpc_error(grpc.StatusCode.INTERNAL), unavailable).code == -1


def test_topic_ids_become_kafka_uuids() -> None:
    topic_id = uuid.uuid4()
    assert _topic_id(topic_id.hex) == topic_id.bytes
    assert _topic_id(str(topic_id)) == topic_id.bytes
    assert _topic_id("") == bytes(16)
    assert _topic_id("not hex") == bytes(16)


def test_every_advertised_api_has_a_handler() -> None:
    advertised = {entry["api_key"] for entry in served_versions()}
    assert advertised == {api.key for api in APIS} == set(HANDLERS)
    for api in APIS:
        assert api.min_version <= api.max_version, api.name
        assert api.first_flexible is None or api.first_flexible <= api.max_version, api.name

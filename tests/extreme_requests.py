"""Protobuf requests with extreme field values, for "every server rejects bad input cleanly" tests.

``extreme_requests(message_class, count, seed)`` fills each field of a request (and of its
nested messages, two levels deep) with a value chosen among the edges of its type: 0, -1, the
int32/int64 limits, empty and 5,000-character strings, path-like and NUL-holding names, random
bytes, enum numbers outside the enum. A field is left unset at random, so the requests mix
well-formed and absurd parts; ``names`` adds real topic names to the strings. Seeded: a
failure names the seed and the request.
"""

from __future__ import annotations

import collections
import random
from collections.abc import Iterator, Sequence
from typing import Any

import grpc
from google.protobuf import message_factory
from google.protobuf.descriptor import FieldDescriptor, ServiceDescriptor
from google.protobuf.message import Message

__all__ = ["extreme_requests", "send_extreme_requests"]

_FD = FieldDescriptor
_INT32_TYPES = (_FD.TYPE_INT32, _FD.TYPE_SINT32, _FD.TYPE_SFIXED32)
_INT64_TYPES = (_FD.TYPE_INT64, _FD.TYPE_SINT64, _FD.TYPE_SFIXED64)
_INT32 = [0, 1, -1, -2, -3, 2**31 - 1, -(2**31)]
_INT64 = [*_INT32, 2**63 - 1, -(2**63)]
_STRINGS = ["", "t", "x" * 300, "../etc", "é\x00z", "a" * 5000]
_DEPTH = 2


def _scalar(field: FieldDescriptor, rnd: random.Random, names: Sequence[str]) -> Any:
    kind = field.type
    if kind in (
        FieldDescriptor.TYPE_INT32,
        FieldDescriptor.TYPE_SINT32,
        FieldDescriptor.TYPE_SFIXED32,
    ):
        return rnd.choice(_INT32)
    if kind in (
        FieldDescriptor.TYPE_INT64,
        FieldDescriptor.TYPE_SINT64,
        FieldDescriptor.TYPE_SFIXED64,
    ):
        return rnd.choice(_INT64)
    if kind in (FieldDescriptor.TYPE_UINT32, FieldDescriptor.TYPE_FIXED32):
        return rnd.choice([0, 1, 2**32 - 1])
    if kind in (FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_FIXED64):
        return rnd.choice([0, 1, 2**64 - 1])
    if kind == FieldDescriptor.TYPE_BOOL:
        return rnd.random() < 0.5
    if kind == FieldDescriptor.TYPE_STRING:
        return rnd.choice([*_STRINGS, *names])
    if kind == FieldDescriptor.TYPE_BYTES:
        return rnd.choice([b"", b"\x00" * 70, rnd.randbytes(80)])
    if kind == FieldDescriptor.TYPE_ENUM:
        return rnd.choice([v.number for v in field.enum_type.values] + [99, -5])
    return rnd.choice([0.0, -1.0, 1e300])  # float, double


def _fill(message: Message, depth: int, rnd: random.Random, names: Sequence[str]) -> None:
    for field in message.DESCRIPTOR.fields:
        if rnd.random() < 0.3:
            continue
        value = getattr(message, field.name)
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            if depth >= _DEPTH or field.message_type.GetOptions().map_entry:
                continue
            if field.is_repeated:
                for _ in range(rnd.choice([1, 2])):
                    _fill(value.add(), depth + 1, rnd, names)
            else:
                _fill(value, depth + 1, rnd, names)
        elif field.is_repeated:
            value.extend(_scalar(field, rnd, names) for _ in range(rnd.choice([1, 2, 3])))
        else:
            setattr(message, field.name, _scalar(field, rnd, names))


def extreme_requests(
    message_class: type[Message], count: int, seed: int, names: Sequence[str] = ()
) -> Iterator[Message]:
    """``count`` instances of ``message_class`` with extreme field values (see the module);
    ``names`` join the strings to choose from (real topics, so that some requests reach data)."""
    rnd = random.Random(seed)
    for _ in range(count):
        message = message_class()
        _fill(message, 0, rnd, names)
        yield message


#: Fields that ask a server to wait (long polls, acks=all): legal at any size, so kept short.
_WAITS = ("max_wait_ms", "timeout_ms")


def send_extreme_requests(
    channel: grpc.Channel,
    service: ServiceDescriptor,
    method: str,
    count: int,
    *,
    names: Sequence[str] = (),
    timeout_s: float = 15.0,
) -> collections.Counter[str]:
    """Send ``count`` extreme requests to the unary ``method`` of ``service`` (seeded by the
    method's name) and count the outcomes; fails at the first status other than OK or
    INVALID_ARGUMENT (a bad request refused cleanly), naming the request."""
    rpc = service.methods_by_name[method]
    call = channel.unary_unary(
        f"/{service.full_name}/{method}",
        request_serializer=lambda message: message.SerializeToString(),
        response_deserializer=message_factory.GetMessageClass(rpc.output_type).FromString,
    )
    request_class = message_factory.GetMessageClass(rpc.input_type)
    outcomes: collections.Counter[str] = collections.Counter()
    for request in extreme_requests(request_class, count, sum(map(ord, method)), names):
        for field in _WAITS:
            if field in request.DESCRIPTOR.fields_by_name:
                setattr(request, field, min(getattr(request, field), 100))
        try:
            call(request, timeout=timeout_s)
            outcomes["OK"] += 1
        except grpc.RpcError as error:
            assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, (error.details(), request)
            outcomes[error.code().name] += 1
    return outcomes

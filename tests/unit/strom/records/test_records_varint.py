"""Zigzag varints: edge values, strict decoding, and the C twin agreeing with Python."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st
from records_util import PROPERTY_SETTINGS, outcome, zigzag_varint

from strom.errors import TruncatedBatchError, VarintOverflowError
from strom.records.kernel import PYTHON, Kernel
from strom.records.varint import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    size_of_varint,
    zigzag_decode,
    zigzag_encode,
)

KNOWN = [
    (0, "00"),
    (-1, "01"),
    (1, "02"),
    (-2, "03"),
    (63, "7e"),
    (-64, "7f"),
    (64, "8001"),
    (300, "d804"),
    (INT32_MAX, "feffffff0f"),
    (INT32_MIN, "ffffffff0f"),
]
KNOWN_LONG = [
    *KNOWN,
    (INT32_MAX + 1, "8080808010"),
    (INT64_MAX, "feffffffffffffffff01"),
    (INT64_MIN, "ffffffffffffffffff01"),
]


@pytest.mark.parametrize(("value", "encoded"), KNOWN)
def test_varint_known_values(kernel: Kernel, value: int, encoded: str) -> None:
    raw = bytes.fromhex(encoded)
    assert kernel.encode_varint(value) == raw
    assert kernel.decode_varint(raw) == (value, len(raw))
    assert size_of_varint(value) == len(raw)


@pytest.mark.parametrize(("value", "encoded"), KNOWN_LONG)
def test_varlong_known_values(kernel: Kernel, value: int, encoded: str) -> None:
    raw = bytes.fromhex(encoded)
    assert kernel.encode_varlong(value) == raw
    assert kernel.decode_varlong(raw) == (value, len(raw))
    assert kernel.decode_varlong(b"\xaa" + raw + b"\xbb", 1) == (value, 1 + len(raw))


@pytest.mark.parametrize("value", [INT32_MAX + 1, INT32_MIN - 1])
def test_varint_encode_rejects_out_of_range(kernel: Kernel, value: int) -> None:
    with pytest.raises(ValueError, match="int32"):
        kernel.encode_varint(value)


@pytest.mark.parametrize("value", [INT64_MAX + 1, INT64_MIN - 1])
def test_varlong_encode_rejects_out_of_range(kernel: Kernel, value: int) -> None:
    with pytest.raises(ValueError, match="int64"):
        kernel.encode_varlong(value)


@pytest.mark.parametrize(
    "raw",
    [
        "8080808080",  # 5 bytes, the last still continuing
        "808080808001",  # 6 bytes
        "ffffffff1f",  # 5 bytes, but 33 bits
        "ffffffff7f",
    ],
)
def test_varint_overflow(kernel: Kernel, raw: str) -> None:
    with pytest.raises(VarintOverflowError, match="overflows 32 bits"):
        kernel.decode_varint(bytes.fromhex(raw))


@pytest.mark.parametrize(
    "raw",
    [
        "80808080808080808080",  # 10 bytes, the last still continuing
        "8080808080808080808001",  # 11 bytes
        "ffffffffffffffffff02",  # 10 bytes, but 65 bits
    ],
)
def test_varlong_overflow(kernel: Kernel, raw: str) -> None:
    with pytest.raises(VarintOverflowError, match="overflows 64 bits"):
        kernel.decode_varlong(bytes.fromhex(raw))


@pytest.mark.parametrize("raw", ["", "80", "ff80", "80808080"])
def test_varint_truncated(kernel: Kernel, raw: str) -> None:
    with pytest.raises(TruncatedBatchError, match="truncated"):
        kernel.decode_varint(bytes.fromhex(raw))
    with pytest.raises(TruncatedBatchError, match="truncated"):
        kernel.decode_varlong(bytes.fromhex(raw))


def test_varint_position_out_of_range(kernel: Kernel) -> None:
    with pytest.raises(ValueError, match="outside the buffer"):
        kernel.decode_varint(b"\x00", 2)
    with pytest.raises(ValueError, match="outside the buffer"):
        kernel.decode_varint(b"\x00", -1)


def test_zigzag_helpers() -> None:
    for value in (0, -1, 1, INT64_MIN, INT64_MAX, INT32_MIN, INT32_MAX):
        assert zigzag_decode(zigzag_encode(value)) == value
    assert zigzag_encode(-1) == 1
    assert zigzag_encode(INT64_MIN) == 2**64 - 1


@PROPERTY_SETTINGS
@given(st.integers(INT64_MIN, INT64_MAX))
def test_varlong_round_trip(value: int) -> None:
    for kernel_ in _kernels():
        raw = kernel_.encode_varlong(value)
        assert raw == zigzag_varint(value)
        assert kernel_.decode_varlong(raw) == (value, len(raw))


@PROPERTY_SETTINGS
@given(st.integers(INT32_MIN, INT32_MAX))
def test_varint_round_trip(value: int) -> None:
    for kernel_ in _kernels():
        raw = kernel_.encode_varint(value)
        assert raw == zigzag_varint(value)
        assert kernel_.decode_varint(raw) == (value, len(raw))


def test_kernels_agree_on_random_bytes(c_kernel: Kernel) -> None:
    rng = random.Random(7)
    for _ in range(3000):
        raw = bytes(
            rng.choice((0x00, 0x01, 0x7F, 0x80, 0xFF, rng.randrange(256))) for _ in range(12)
        )
        raw = raw[: rng.randrange(13)]
        pos = rng.randrange(len(raw) + 1)
        for fn in ("decode_varint", "decode_varlong"):
            expected = outcome(lambda f=fn, r=raw, p=pos: getattr(PYTHON, f)(r, p))
            got = outcome(lambda f=fn, r=raw, p=pos: getattr(c_kernel, f)(r, p))
            assert got == expected, raw.hex()


def _kernels() -> list[Kernel]:
    from strom.records.kernel import available

    return available()

"""Known answers: hand-laid batches (struct.pack, Kafka's layout), the CRC-32C of known input,
the worked example of docs/record-batch-format.md, and the compressed-stream framing."""

from __future__ import annotations

import re
import struct
from pathlib import Path

import pytest
from records_util import raw_batch, raw_record

from strom.records import Compression, Record, decode_batch, encode_batch, validate_batch
from strom.records.crc import crc32c
from strom.records.kernel import Kernel

DOC = Path(__file__).resolve().parents[4] / "docs" / "record-batch-format.md"


def bitwise_crc32c(data: bytes) -> int:
    """CRC-32C computed bit by bit from its definition (independent of the crc32c package)."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def test_crc32c_check_value() -> None:
    assert crc32c(b"123456789") == 0xE3069283
    assert bitwise_crc32c(b"123456789") == 0xE3069283
    assert crc32c(b"6789", crc32c(b"12345")) == 0xE3069283


def doc_example() -> bytes:
    text = DOC.read_text(encoding="utf-8")
    block = re.search(r"worked-example:begin -->\s*```\n(.*?)```", text, re.S)
    assert block, "the worked example is missing from docs/record-batch-format.md"
    hex_digits = [line.split("#", 1)[0] for line in block.group(1).splitlines()]
    return bytes.fromhex(" ".join(hex_digits))


DOC_RECORDS = [
    (1_700_000_000_000, b"k", b"hello", [("h", b"1")]),
    (1_700_000_000_010, None, b"x"),
]


def test_doc_worked_example_encodes_byte_for_byte(kernel: Kernel) -> None:
    expected = doc_example()
    assert len(expected) == 86
    assert encode_batch(DOC_RECORDS, kernel=kernel) == expected


def test_doc_worked_example_decodes(kernel: Kernel) -> None:
    batch = decode_batch(doc_example(), kernel=kernel)
    assert batch.records == [
        Record(0, 1_700_000_000_000, b"k", b"hello", (("h", b"1"),)),
        Record(1, 1_700_000_000_010, None, b"x", ()),
    ]


def test_doc_worked_example_crc() -> None:
    data = doc_example()
    assert struct.unpack_from(">I", data, 17)[0] == 0xD51FC6D0
    assert bitwise_crc32c(data[21:]) == 0xD51FC6D0
    assert validate_batch(data).crc == 0xD51FC6D0


def test_hand_laid_batch_decodes(kernel: Kernel) -> None:
    """A batch assembled field by field with struct, as DefaultRecordBatch lays it out."""
    records = (
        raw_record(ts_delta=0, offset_delta=0, key=b"user-1", value=b'{"n":1}')
        + raw_record(ts_delta=-3, offset_delta=1, key=None, value=None, headers=((b"src", b"app"),))
        + raw_record(ts_delta=1 << 40, offset_delta=2, key=b"", value=b"", headers=((b"", None),))
    )
    data = raw_batch(
        records,
        count=3,
        base_offset=5_000_000_000,
        leader_epoch=12,
        attributes=0x10,
        first_timestamp=1_650_000_000_000,
        max_timestamp=1_650_000_000_000 + (1 << 40),
        producer_id=99,
        producer_epoch=4,
        base_sequence=123,
    )
    assert bitwise_crc32c(data[21:]) == struct.unpack_from(">I", data, 17)[0]
    batch = decode_batch(data, kernel=kernel)
    assert batch.is_transactional
    assert batch.partition_leader_epoch == 12
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (99, 4, 123)
    assert batch.header.last_sequence == 125
    assert batch.records == [
        Record(5_000_000_000, 1_650_000_000_000, b"user-1", b'{"n":1}', ()),
        Record(5_000_000_001, 1_649_999_999_997, None, None, (("src", b"app"),)),
        Record(5_000_000_002, 1_650_000_000_000 + (1 << 40), b"", b"", (("", None),)),
    ]
    # The encoder lays the same records out identically.
    same = encode_batch(
        [(r.timestamp, r.key, r.value, list(r.headers)) for r in batch.records],
        base_offset=5_000_000_000,
        partition_leader_epoch=12,
        producer_id=99,
        producer_epoch=4,
        base_sequence=123,
        is_transactional=True,
        kernel=kernel,
    )
    assert same == data


def test_hand_laid_log_append_time_batch(kernel: Kernel) -> None:
    records = raw_record(ts_delta=0) + raw_record(ts_delta=7, offset_delta=1)
    data = raw_batch(records, count=2, attributes=0x08, first_timestamp=100, max_timestamp=555)
    assert [r.timestamp for r in decode_batch(data, kernel=kernel).records] == [555, 555]


def test_lz4_frame_is_kafka_compatible() -> None:
    data = encode_batch([(0, None, b"abc" * 1000)], compression="lz4")
    section = data[61:]
    assert section[:4] == bytes.fromhex("04224d18")  # LZ4 frame magic
    assert section[4] == 0x60  # FLG: version 1, independent blocks, no checksums, no size
    assert section[5] == 0x40  # BD: 64 KiB max block
    assert section[-4:] == b"\x00\x00\x00\x00"  # end mark, no content checksum
    assert struct.unpack_from(">h", data, 21)[0] & 0x07 == Compression.LZ4


@pytest.mark.parametrize(
    ("codec", "magic"),
    [("gzip", bytes.fromhex("1f8b08")), ("zstd", bytes.fromhex("28b52ffd"))],
)
def test_compressed_stream_magic(codec: str, magic: bytes) -> None:
    data = encode_batch([(0, None, b"abc" * 100)], compression=codec)
    assert data[61 : 61 + len(magic)] == magic
    # The CRC covers the compressed bytes.
    assert bitwise_crc32c(data[21:]) == struct.unpack_from(">I", data, 17)[0]

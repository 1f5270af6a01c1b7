"""Compression of a batch's records section (everything after the 61-byte header).

The codec is bits 0-2 of the batch attributes; the whole records section is compressed as one
stream, the header never is::

    code  name     stream format (as Kafka writes it for magic 2)
       0  none     the records as they are
       1  gzip     gzip (RFC 1952) members, as java.util.zip.GZIPOutputStream writes
       2  snappy   xerial "stream" framing, as Kafka's Java client writes it (a 16-byte header,
                   then 32 KiB blocks, each a big-endian int32 length and one raw snappy
                   block); raw (unframed) snappy, as librdkafka writes it, is read too
       3  lz4      one LZ4 *frame* (not raw blocks): version 1, independent blocks, no block or
                   content checksum, no content size, 64 KiB maximum block size
       4  zstd     zstandard frame(s)

Decompression is bounded (a "decompression bomb" guard): output beyond ``max_size`` bytes
(default ``DEFAULT_MAX_DECOMPRESSED_SIZE``, 256 MiB) is refused with
``InvalidBatchLengthError`` before it is allocated in full. A stream that does not decode, ends
early or is followed by stray bytes raises ``CorruptRecordError``. Third-party exceptions never
escape this module.

Compressor objects are cached per thread (zstandard's are not thread-safe).
"""

from __future__ import annotations

import struct
import threading
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from enum import IntEnum

import cramjam
import lz4.frame
import zstandard

from strom.errors import (
    ConfigurationError,
    CorruptRecordError,
    InvalidBatchLengthError,
    UnsupportedCompressionTypeError,
)

__all__ = [
    "DEFAULT_MAX_DECOMPRESSED_SIZE",
    "Compression",
    "check_codec",
    "compress",
    "decompress",
]

#: Largest records section a compressed batch may expand to, unless the caller says otherwise.
DEFAULT_MAX_DECOMPRESSED_SIZE = 256 * 1024 * 1024

_GZIP_WBITS = 16 + zlib.MAX_WBITS  # gzip header and trailer, not raw deflate or zlib
_GZIP_DEFAULT_LEVEL = 6  # zlib's default, which Kafka's gzip.level -1 also means
_LZ4_DEFAULT_LEVEL = 0  # lz4's fast mode (Kafka < 3.8 behaviour; HC levels are slow)
_ZSTD_DEFAULT_LEVEL = 3  # Kafka's compression.zstd.level default
# zstd input is fed in slices so that output can be checked against the limit as it grows;
# a zstd block of 4 bytes can expand to 128 KiB, so one slice adds at most ~256 MiB.
_ZSTD_SLICE = 8192
# lz4's decompressor is slow when asked for a huge (or a sub-block) output buffer at once.
_LZ4_CHUNK = 4 * 1024 * 1024
# xerial snappy framing (org.xerial.snappy.SnappyOutputStream): magic, version 1, compatible 1.
_XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
_XERIAL_MAGIC = _XERIAL_HEADER[:8]
_XERIAL_BLOCK = 32 * 1024  # SnappyOutputStream's default block size


class Compression(IntEnum):
    """Compression codec of a batch (attribute bits 0-2), with Kafka's names and codes."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def from_name(cls, name: str | int | Compression | None) -> Compression:
        """Parse Kafka's ``compression.type`` spelling (``"lz4"``, ``"none"``, ...).

        Also accepts a member, its code, or ``None`` (no compression). Raises
        ``ConfigurationError`` naming the bad value.
        """
        if name is None:
            return cls.NONE
        if isinstance(name, cls):
            return name
        if isinstance(name, int) and not isinstance(name, bool):
            try:
                return cls(name)
            except ValueError:
                pass
        elif isinstance(name, str):
            member = cls.__members__.get(name.strip().upper())
            if member is not None:
                return member
        choices = ", ".join(member.name.lower() for member in cls)
        raise ConfigurationError(f"compression type {name!r} is not one of {choices}")


def check_codec(code: int) -> Compression:
    """The ``Compression`` for attribute bits ``code``, if this build can (de)compress it.

    Raises ``UnsupportedCompressionTypeError`` for codes 5-7.
    """
    try:
        return Compression(code)
    except ValueError:
        raise UnsupportedCompressionTypeError(
            f"unknown compression codec {code} (attribute bits 0-2)"
        ) from None


class _PerThread(threading.local):
    def __init__(self) -> None:
        self.zstd_compressors: dict[int, zstandard.ZstdCompressor] = {}
        self.zstd_decompressor = zstandard.ZstdDecompressor()


_local = _PerThread()


def compress(codec: int, data: bytes | bytearray | memoryview, level: int | None = None) -> bytes:
    """Compress a records section with ``codec``; ``level`` None means the codec's default."""
    kind = check_codec(codec)
    if kind is Compression.NONE:
        return bytes(data)
    if kind is Compression.LZ4:
        return lz4.frame.compress(
            data,
            compression_level=_LZ4_DEFAULT_LEVEL if level is None else level,
            block_size=lz4.frame.BLOCKSIZE_MAX64KB,
            block_linked=False,
            content_checksum=False,
            block_checksum=False,
            store_size=False,
        )
    if kind is Compression.ZSTD:
        level = _ZSTD_DEFAULT_LEVEL if level is None else level
        compressor = _local.zstd_compressors.get(level)
        if compressor is None:
            compressor = zstandard.ZstdCompressor(level=level)
            _local.zstd_compressors[level] = compressor
        return compressor.compress(data)
    if kind is Compression.SNAPPY:
        return _snappy_compress(data)
    deflate = zlib.compressobj(
        _GZIP_DEFAULT_LEVEL if level is None else level, zlib.DEFLATED, _GZIP_WBITS
    )
    return deflate.compress(data) + deflate.flush()


@contextmanager
def _translated(kind: Compression, size: int) -> Iterator[None]:
    """Turn the codec libraries' exceptions into ``CorruptRecordError`` (the one boundary)."""
    try:
        yield
    except CorruptRecordError:
        raise
    except (
        RuntimeError,
        ValueError,
        zlib.error,
        zstandard.ZstdError,
        cramjam.DecompressionError,
        EOFError,
        OSError,
    ) as exc:
        raise CorruptRecordError(
            f"{kind.name.lower()} records section of {size} bytes does not decompress: {exc}"
        ) from exc


def _too_large(kind: Compression, size: int, max_size: int) -> InvalidBatchLengthError:
    return InvalidBatchLengthError(
        f"{kind.name.lower()} records section of {size} bytes expands beyond the limit of "
        f"{max_size} bytes (decompression bomb guard)"
    )


def _stray(kind: Compression, size: int, stray: int) -> CorruptRecordError:
    return CorruptRecordError(
        f"{kind.name.lower()} records section of {size} bytes has {stray} stray bytes after its end"
    )


def _unfinished(kind: Compression, size: int) -> CorruptRecordError:
    return CorruptRecordError(
        f"{kind.name.lower()} records section of {size} bytes ends inside the compressed stream"
    )


def decompress(
    codec: int,
    data: bytes | bytearray | memoryview,
    max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> bytes:
    """Decompress a records section; never returns (or builds) more than ``max_size`` bytes."""
    kind = check_codec(codec)
    if kind is Compression.NONE:
        return bytes(data)
    size = len(data)
    with _translated(kind, size):
        if kind is Compression.LZ4:
            return _lz4_decompress(data, size, max_size)
        if kind is Compression.ZSTD:
            return _zstd_decompress(data, size, max_size)
        if kind is Compression.SNAPPY:
            return _snappy_decompress(data, size, max_size)
        return _gzip_decompress(data, size, max_size)


def _lz4_decompress(data: bytes | bytearray | memoryview, size: int, max_size: int) -> bytes:
    decompressor = lz4.frame.LZ4FrameDecompressor()
    part = decompressor.decompress(data, max_length=min(max_size + 1, _LZ4_CHUNK))
    parts = [part]
    produced = len(part)
    while True:
        if produced > max_size:
            raise _too_large(Compression.LZ4, size, max_size)
        if decompressor.eof or decompressor.needs_input:
            break
        # More output is pending (the chunk filled up): fetch it without new input.
        part = decompressor.decompress(b"", max_length=min(max_size + 1 - produced, _LZ4_CHUNK))
        parts.append(part)
        produced += len(part)
    if not decompressor.eof:
        raise _unfinished(Compression.LZ4, size)
    if decompressor.unused_data:
        raise _stray(Compression.LZ4, size, len(decompressor.unused_data))
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _gzip_decompress(data: bytes | bytearray | memoryview, size: int, max_size: int) -> bytes:
    # Kafka's GZIPInputStream reads concatenated members; so do we.
    parts: list[bytes] = []
    produced = 0
    rest: bytes | bytearray | memoryview = data
    while True:
        inflate = zlib.decompressobj(_GZIP_WBITS)
        part = inflate.decompress(rest, max_size - produced + 1)
        produced += len(part)
        if produced > max_size:
            raise _too_large(Compression.GZIP, size, max_size)
        parts.append(part)
        if not inflate.eof:
            raise _unfinished(Compression.GZIP, size)
        rest = inflate.unused_data
        if not rest:
            break
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _zstd_decompress(data: bytes | bytearray | memoryview, size: int, max_size: int) -> bytes:
    # Frames without a content size (as Kafka's Java producer writes) give no bound up front,
    # so the input goes in slices and the output is checked after each; frames follow frames.
    view = memoryview(data)
    parts: list[bytes] = []
    produced = 0
    pos = 0
    dctx = _local.zstd_decompressor
    while True:
        content_size = zstandard.frame_content_size(view[pos:])
        if content_size > max_size - produced:
            raise _too_large(Compression.ZSTD, size, max_size)
        frame = dctx.decompressobj()
        while not frame.eof and pos < size:
            part = frame.decompress(view[pos : pos + _ZSTD_SLICE])
            pos += min(_ZSTD_SLICE, size - pos)
            produced += len(part)
            if produced > max_size:
                raise _too_large(Compression.ZSTD, size, max_size)
            if part:
                parts.append(part)
        if not frame.eof:
            raise _unfinished(Compression.ZSTD, size)
        pos -= len(frame.unused_data)
        if pos >= size:
            break
    if len(parts) == 1:
        return parts[0]
    return b"".join(parts)


def _snappy_compress(data: bytes | bytearray | memoryview) -> bytes:
    # Java's SnappyOutputStream framing: every Kafka client reads it (librdkafka and the
    # Python clients detect the header; Java's SnappyInputStream requires it for v0/v1).
    view = memoryview(data)
    parts = [_XERIAL_HEADER]
    for pos in range(0, len(view), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(view[pos : pos + _XERIAL_BLOCK]))
        parts.append(struct.pack(">i", len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_decompress(data: bytes | bytearray | memoryview, size: int, max_size: int) -> bytes:
    # A raw snappy block starts with its uncompressed length (a varint) and its first element
    # is a literal, so it never starts with the xerial magic: the two forms cannot be confused.
    view = memoryview(data)
    if bytes(view[:8]) != _XERIAL_MAGIC:
        return _snappy_block(view, size, max_size)
    if size < len(_XERIAL_HEADER):
        raise _unfinished(Compression.SNAPPY, size)
    parts: list[bytes] = []
    produced = 0
    pos = len(_XERIAL_HEADER)
    while pos < size:
        if pos + 4 > size:
            raise _unfinished(Compression.SNAPPY, size)
        (length,) = struct.unpack_from(">i", view, pos)
        pos += 4
        if length < 0 or pos + length > size:
            raise _unfinished(Compression.SNAPPY, size)
        part = _snappy_block(view[pos : pos + length], size, max_size - produced)
        pos += length
        produced += len(part)
        parts.append(part)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _snappy_block(block: memoryview, size: int, max_size: int) -> bytes:
    """One raw snappy block; its declared length is checked before anything is allocated."""
    if cramjam.snappy.decompress_raw_len(block) > max_size:
        raise _too_large(Compression.SNAPPY, size, max_size)
    return bytes(cramjam.snappy.decompress_raw(block))

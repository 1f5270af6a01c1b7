"""The C twin specifically: binding, leaks, re-entrancy, threads; and the public surface."""

from __future__ import annotations

import contextlib
import gc
import os
import subprocess
import sys
import threading
import tracemalloc
from collections.abc import Callable, Iterator
from types import ModuleType

import pytest
from records_util import raw_batch, raw_record

import strom.records
from strom.errors import CorruptRecordError
from strom.records import decode_batch, decode_columns, encode_batch
from strom.records._native import disabled_by_env
from strom.records.kernel import Kernel, available


def run_python(code: str, **env: str) -> str:
    environ = {k: v for k, v in os.environ.items() if k != "STROM_NO_EXTENSIONS"}
    environ.update(env)
    done = subprocess.run(
        [sys.executable, "-c", code], env=environ, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_env_switch_forces_pure_python() -> None:
    code = "import strom.records as r; print(r.IMPLEMENTATION)"
    assert run_python(code, STROM_NO_EXTENSIONS="1") == "python"
    if not disabled_by_env:
        assert run_python(code) == "c"
        assert run_python(code, STROM_NO_EXTENSIONS="0") == "c"


def test_active_implementation_matches_the_environment() -> None:
    assert ("python" if disabled_by_env else "c") == strom.records.IMPLEMENTATION


def test_public_surface_is_locked() -> None:
    names = {name for name in vars(strom.records) if not name.startswith("_")}
    # Submodules appear as attributes once imported (by the package or by another test).
    modules = {name for name in names if isinstance(getattr(strom.records, name), ModuleType)}
    assert set(strom.records.__all__) == names - modules - {"Literal", "annotations"}
    assert strom.records.__all__ == sorted(
        strom.records.__all__, key=lambda n: (not n.isupper(), n)
    )


def _traced_growth(fn: Callable[[], object], rounds: int) -> int:
    for _ in range(200):  # warm caches, free lists, interned strings
        fn()
    gc.collect()
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        for _ in range(rounds):
            fn()
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - start
    finally:
        tracemalloc.stop()


def _leak_cases(kernel: Kernel) -> Iterator[tuple[str, Callable[[], object]]]:
    good = encode_batch(
        [(i, b"k%d" % i, b"v" * 100, [("h", b"x"), ("n", None)]) for i in range(20)],
        kernel=kernel,
    )
    bad_utf8 = raw_batch(raw_record(headers=((b"\xff", b"v"),)), count=1)
    bad_count = raw_batch(raw_record() * 1, count=2)
    bad_layout = raw_batch(raw_record(body=b"\x00\x00\x00\x03\x01\x00"), count=1)

    def expect_corrupt(data: bytes) -> Callable[[], object]:
        def call() -> object:
            try:
                return decode_batch(data, kernel=kernel)
            except CorruptRecordError:
                return None

        return call

    def encode() -> object:
        builder = strom.records.BatchBuilder(kernel=kernel)
        for i in range(20):
            builder.append(i, b"key", b"value" * 20, [("h", b"x")] if i % 2 else None)
        with contextlib.suppress(TypeError):
            builder.append(1, b"k", b"v", [("h", 5)])  # type: ignore[list-item]
        return builder.build()

    yield "decode", lambda: decode_batch(good, kernel=kernel)
    yield "columns", lambda: decode_columns(good, kernel=kernel)
    yield "encode", encode
    yield "bad utf8", expect_corrupt(bad_utf8)
    yield "bad count", expect_corrupt(bad_count)
    yield "bad layout", expect_corrupt(bad_layout)


@pytest.mark.parametrize(
    "case", ["decode", "columns", "encode", "bad utf8", "bad count", "bad layout"]
)
def test_no_leaks(c_kernel: Kernel, case: str) -> None:
    fn = dict(_leak_cases(c_kernel))[case]
    growth = _traced_growth(fn, 20_000)
    assert growth < 64 * 1024, f"{case}: {growth} bytes still allocated after 20000 calls"


def _rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs Linux /proc")
def test_rss_stays_flat_over_200k_decodes(c_kernel: Kernel) -> None:
    data = encode_batch([(1, b"key", b"v" * 100, [("h", b"x")])] * 3, kernel=c_kernel)
    bad = raw_batch(raw_record(headers=((b"\xff", b"v"),)), count=1)
    for _ in range(20_000):
        decode_batch(data, kernel=c_kernel)
    before = _rss()
    for i in range(200_000):
        decode_batch(data, kernel=c_kernel)
        if i % 4 == 0:
            with pytest.raises(CorruptRecordError):
                decode_batch(bad, kernel=c_kernel)
    growth = _rss() - before
    assert growth < 4 * 1024 * 1024, f"RSS grew by {growth} bytes"


def test_inputs_keep_their_reference_counts(c_kernel: Kernel) -> None:
    key, value, header_value = b"some-key", b"some-value" * 3, b"hv"
    headers = [("h", header_value)]
    data = encode_batch([(1, key, value, headers)], kernel=c_kernel)
    before = [sys.getrefcount(obj) for obj in (key, value, header_value, headers, data)]
    for _ in range(1000):
        builder = strom.records.BatchBuilder(kernel=c_kernel)
        builder.append(1, key, value, headers)
        builder.append_many([2], [key], [value], [headers])
        builder.build()
        decode_batch(data, kernel=c_kernel)
    del builder
    after = [sys.getrefcount(obj) for obj in (key, value, header_value, headers, data)]
    assert after == before


def test_writer_refuses_reentrant_use(c_kernel: Kernel) -> None:
    writer = c_kernel.writer()

    def sneaky_headers() -> Iterator[tuple[str, bytes]]:
        writer.append(2, None, b"inner")
        yield ("h", b"v")

    with pytest.raises(RuntimeError, match="already in use"):
        writer.append(1, None, b"outer", sneaky_headers())
    assert writer.record_count == 0
    assert writer.append(1, None, b"ok") == 0


def test_writer_rejects_bad_arity(c_kernel: Kernel) -> None:
    writer = c_kernel.writer()
    with pytest.raises(TypeError):
        writer.append(1, None)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        c_kernel.writer(1)  # type: ignore[call-arg]


def test_non_contiguous_buffers_are_refused(kernel: Kernel) -> None:
    strided = memoryview(b"abcdef")[::2]
    with pytest.raises(BufferError):
        encode_batch([(1, strided, b"v")], kernel=kernel)


def test_concurrent_decoding_from_threads(kernel: Kernel) -> None:
    data = encode_batch([(i, b"k", b"v" * i, [("h", b"x")]) for i in range(200)], kernel=kernel)
    expected = decode_batch(data, kernel=kernel).records
    failures: list[object] = []

    def work() -> None:
        for _ in range(50):
            if decode_batch(data, kernel=kernel).records != expected:
                failures.append("mismatch")

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures


def test_both_kernels_listed() -> None:
    names = [k.name for k in available()]
    assert names == (["python"] if disabled_by_env else ["python", "c"])

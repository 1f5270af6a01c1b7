"""Run every record-codec test against each kernel: pure Python and, when built, C.

The C extension is expected unless ``STROM_NO_EXTENSIONS`` is set: a build that silently fell
back to pure Python would otherwise pass here while every client ran slowly. So the run stops
when the extension should be there and is not.
"""

from __future__ import annotations

import pytest

from strom.records import _native
from strom.records import kernel as kernels
from strom.records.kernel import Kernel

if not _native.disabled_by_env and _native.crecords is None:
    pytest.exit(
        "strom.records: the C extension was expected but did not load "
        f"({_native.reason}). Rebuild it (pip install -e ./clients) or set "
        "STROM_NO_EXTENSIONS=1 to test the pure-Python codec only.",
        returncode=3,
    )

KERNELS = kernels.available()


@pytest.fixture(params=KERNELS, ids=[k.name for k in KERNELS])
def kernel(request: pytest.FixtureRequest) -> Kernel:
    """Each available kernel in turn."""
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def c_kernel() -> Kernel:
    """The C kernel (skips when STROM_NO_EXTENSIONS disabled it)."""
    if kernels.C is None:
        pytest.skip("C extension disabled by STROM_NO_EXTENSIONS")
    return kernels.C

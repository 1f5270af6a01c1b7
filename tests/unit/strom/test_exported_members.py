"""The public names of ``strom``, ``strom.aio`` and ``strom.cluster`` are locked: ``__all__`` is
exactly what each package defines or re-exports (sorted), and a change to it changes this file.
(After httpx's tests/test_exported_members.py.)"""

from __future__ import annotations

import types

import pytest

import strom
import strom.aio
import strom.cluster

EXPECTED = {
    strom: [
        "Admin",
        "BrokerResponseError",
        "ConfigurationError",
        "Consumer",
        "ConsumerGroupMetadata",
        "ConsumerRecord",
        "NewTopic",
        "OffsetAndMetadata",
        "OutputRecord",
        "Producer",
        "RecordFuture",
        "RecordMetadata",
        "StromError",
        "StromTimeoutError",
        "TopicPartition",
        "TransactionalLoop",
    ],
    strom.aio: ["Admin", "Consumer", "ConsumerGroupMetadata", "Producer", "TransactionalLoop"],
    strom.cluster: [
        "DEFAULT_BOOTSTRAP_SERVERS",
        "DEFAULT_MAX_MESSAGE_SIZE",
        "METADATA_ERRORS",
        "BackgroundLoop",
        "ClusterClient",
        "PartitionLeader",
        "channel_options",
        "from_rpc_error",
        "list_offsets",
        "parse_servers",
        "storage_call",
        "translate_errors",
        "where",
    ],
}
#: Dunder names a package may export besides its public ones.
INCLUDED_PRIVATE = {"__version__"}


def _public(module: types.ModuleType) -> list[str]:
    """What the package defines or imports for its users: not its submodules (importing
    ``strom.x`` anywhere sets ``strom.x``), not underscore names."""
    return sorted(
        name
        for name, value in vars(module).items()
        if (not name.startswith("_") or name in INCLUDED_PRIVATE)
        and not isinstance(value, types.ModuleType)
    )


@pytest.mark.parametrize("module", list(EXPECTED), ids=lambda m: m.__name__)
def test_all_is_every_public_name_sorted(module: types.ModuleType) -> None:
    exported = [name for name in module.__all__ if name not in INCLUDED_PRIVATE]
    assert exported == sorted(exported, key=lambda n: (not n.isupper(), n))
    public = [name for name in _public(module) if name not in INCLUDED_PRIVATE]
    assert sorted(module.__all__) == public


@pytest.mark.parametrize("module", list(EXPECTED), ids=lambda m: m.__name__)
def test_the_public_names_are_locked(module: types.ModuleType) -> None:
    assert module.__all__ == EXPECTED[module]
    for name in module.__all__:
        assert getattr(module, name) is not None


def test_each_client_package_holds_both_twins() -> None:
    for sync, aio, package in (
        (strom.Producer, strom.aio.Producer, "strom.producer"),
        (strom.Consumer, strom.aio.Consumer, "strom.consumer"),
        (strom.Admin, strom.aio.Admin, "strom.admin"),
    ):
        assert sync.__module__.startswith(package + ".")
        assert aio.__module__ == package + ".aio"

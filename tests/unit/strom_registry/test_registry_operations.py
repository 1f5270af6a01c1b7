"""The registry's operations over a store that applies records as the topic's reader would:
versions and ids, lookups, soft and permanent deletes, configs, modes, references, and the
Confluent error of each refusal."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

import pytest

from strom_registry.errors import RegistryError
from strom_registry.records import Record
from strom_registry.registry import Registry
from strom_registry.state import RegistryState


class ReplayedStore:
    """Keeps the records like the topic does; ``replay`` rebuilds a state from them, as a
    restarted instance does."""

    def __init__(self, state: RegistryState) -> None:
        self.state = state
        self.log: list[Record] = []
        self.next = 1

    async def sync(self) -> None:
        return None

    async def write(self, batch: Sequence[Record]) -> None:
        for key, value in batch:
            self.log.append((key, value))
            self.state.apply(key, value)

    async def next_id(self, at_least: int) -> int:
        self.next = max(self.next, at_least)
        self.next += 1
        return self.next - 1

    def replay(self) -> RegistryState:
        state = RegistryState()
        latest = dict(self.log)  # what compaction keeps: the last record per key
        for key, value in latest.items():
            state.apply(key, value)
        return state


def record(name: str, *fields: str) -> dict[str, str]:
    schema = {"type": "record", "name": name,
              "fields": [{"name": f, "type": "string", "default": ""} for f in fields]}  # fmt: skip
    return {"schema": json.dumps(schema)}


@pytest.fixture
def registry() -> Registry:
    state = RegistryState()
    return Registry(state, ReplayedStore(state))


def run(coro: object) -> object:
    return asyncio.run(coro)  # type: ignore[arg-type]


def code(call: object) -> int:
    with pytest.raises(RegistryError) as caught:
        result = call()  # type: ignore[operator]
        if asyncio.iscoroutine(result):
            asyncio.run(result)
    return caught.value.error_code


def test_versions_ids_and_lookups(registry: Registry) -> None:
    first = run(registry.register("s", record("A", "x")))
    assert run(registry.register("s", record("A", "x"))) == first  # same schema: same version
    second = run(registry.register("s", record("A", "x", "y")))
    assert second != first
    assert registry.versions("s") == [1, 2]
    # The same schema under another subject shares the id, with its own version 1.
    assert run(registry.register("t", record("A", "x"))) == first
    assert registry.version("t", "latest").version == 1
    assert registry.subjects_of(first) == ["s", "t"]
    assert registry.lookup("s", record("A", "x", "y"))["version"] == 2
    assert code(lambda: registry.lookup("s", record("B", "z"))) == 40403
    assert code(lambda: registry.lookup("nope", record("A", "x"))) == 40401
    assert code(lambda: registry.version("s", 9)) == 40402
    assert code(lambda: registry.version("s", "0")) == 42202
    assert code(lambda: registry.schema(12345)) == 40403
    assert code(lambda: registry.register("bad\x01subject", record("A", "x"))) == 42208
    assert code(lambda: registry.register("", record("A", "x"))) == 42208


def test_incompatible_changes_are_refused_per_level(registry: Registry) -> None:
    run(registry.register("s", record("A", "x")))
    rename = {"schema": json.dumps({"type": "record", "name": "B", "fields": []})}
    assert code(lambda: registry.register("s", rename)) == 409
    run(registry.set_config("s", {"compatibility": "none"}))
    assert registry.config("s") == "NONE"
    assert run(registry.register("s", rename))
    assert code(lambda: registry.set_config("s", {"compatibility": "SIDEWAYS"})) == 42203
    assert code(lambda: registry.config("other")) == 40408
    assert registry.config("other", default_to_global=True) == "BACKWARD"


def test_deletes_and_ids_never_reused(registry: Registry) -> None:
    store = registry.store
    assert isinstance(store, ReplayedStore)
    one = run(registry.register("s", record("A", "x")))
    two = run(registry.register("s", record("A", "x", "y")))
    assert code(lambda: registry.delete_version("s", 1, permanent=True)) == 40407
    assert run(registry.delete_version("s", 2)) == 2
    assert code(lambda: registry.delete_version("s", 2)) == 40406
    assert registry.versions("s") == [1]
    assert registry.versions("s", deleted=True) == [1, 2]
    assert code(lambda: registry.delete_subject("s", permanent=True)) == 40405
    assert run(registry.delete_subject("s")) == [1]
    assert code(lambda: registry.delete_subject("s")) == 40404
    assert code(lambda: registry.versions("s")) == 40401
    assert run(registry.delete_subject("s", permanent=True)) == [1, 2]
    assert code(lambda: registry.schema(two)) == 40403
    # A restarted instance (the compacted topic replayed) gives neither id again.
    state = store.replay()
    assert state.max_id == two and not state.subjects
    fresh = Registry(state, store)
    store.next = 1  # even when the id counter was lost
    assert run(fresh.register("s", record("C", "z"))) not in (one, two)


def test_modes(registry: Registry) -> None:
    run(registry.register("s", record("A", "x")))
    assert run(registry.set_mode(None, {"mode": "READONLY"})) == "READONLY"
    assert code(lambda: registry.register("s", record("A", "x", "y"))) == 42205
    assert code(lambda: registry.set_mode(None, {"mode": "SIDEWAYS"})) == 42204
    assert code(lambda: registry.set_mode(None, {"mode": "IMPORT"})) == 42205  # not empty
    run(registry.set_mode("imported", {"mode": "IMPORT"}))
    body = {**record("I", "x"), "id": 100, "version": 5}
    assert run(registry.register("imported", body)) == 100
    assert registry.version("imported", 5).schema_id == 100
    assert registry.mode("s") == "READONLY"


def test_references(registry: Registry) -> None:
    run(registry.register("address", record("Address", "street")))
    user = {
        "schema": json.dumps(
            {"type": "record", "name": "User", "fields": [{"name": "home", "type": "Address"}]}
        ),
        "references": [{"name": "Address", "subject": "address", "version": 1}],
    }
    user_id = run(registry.register("user", user))
    assert registry.describe_schema(registry.schema(user_id))["references"] == [
        {"name": "Address", "subject": "address", "version": 1}
    ]
    assert registry.referenced_by("address", 1) == [user_id]
    assert code(lambda: registry.delete_subject("address")) == 42206
    missing = {**user, "references": [{"name": "Address", "subject": "address", "version": 4}]}
    assert code(lambda: registry.register("user2", missing)) == 42201

"""Types of the C twin of the producer's per-record path (see _cproducer.c)."""

from collections.abc import Callable
from typing import Any

class BatchBase:
    size: int
    count: int
    closed: bool
    append: Callable[..., int] | None
    deliveries: list[tuple[Any, Any]] | None

class AccumulatorBase:
    used: int
    buffer_memory: int
    batch_size: int

class FutureBase:
    def __init__(
        self, batch: Any, index: int, timestamp: int, key_size: int, value_size: int, /
    ) -> None: ...

class Ready:
    def __await__(self) -> Any: ...
    def send(self, value: object, /) -> Any: ...
    def throw(self, typ: Any, value: Any = ..., tb: Any = ..., /) -> Any: ...
    def close(self) -> None: ...

class Lock:
    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool: ...
    def release(self) -> None: ...
    def locked(self) -> bool: ...
    def __enter__(self) -> bool: ...
    def __exit__(self, *args: object) -> None: ...

class FastSend:
    fallback: Callable[..., Any]
    def __init__(
        self,
        accumulator: AccumulatorBase,
        queues: dict[Any, Any],
        lock: Lock,
        fresh_batch: Callable[[Any], BatchBase],
        metadata: dict[str, Any],
        sticky: dict[str, int],
        sticky_next: Callable[[str, int, int], None],
        sender: Any,
        txn: Any,
        fallback: Callable[..., Any],
        future_type: type[FutureBase],
        max_record: int,
        awaitable: bool,
    ) -> None: ...
    def __call__(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        headers: Any = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        on_delivery: Any = None,
    ) -> Any: ...

def murmur2(data: bytes, /) -> int: ...
def murmur2_partition(key: bytes, num_partitions: int, /) -> int: ...
def append_floor(buf: bytearray, topic: str, value: bytes, /) -> int: ...

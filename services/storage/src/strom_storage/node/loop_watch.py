"""The event loop's tick watch and work slices, for the node (they live in
``strom_server.runtime.loop_watch``: every service's lease keep-alive uses the watch)."""

from strom_server.runtime.loop_watch import LoopSlice, LoopWatch

__all__ = ["APPLY_SLICE_S", "LoopSlice", "LoopWatch"]

#: How long work over many partitions (applying assignments, a fetch, a follower's fetch
#: response) may hold the event loop before it yields (seconds).
APPLY_SLICE_S = 0.02

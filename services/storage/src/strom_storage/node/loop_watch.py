"""The event loop's tick watch and work slices, for the node (they live in
``strom_server.runtime.loop_watch``: every service's lease keep-alive uses the watch)."""

from strom_server.runtime.loop_watch import LoopSlice, LoopWatch

__all__ = ["LoopSlice", "LoopWatch"]

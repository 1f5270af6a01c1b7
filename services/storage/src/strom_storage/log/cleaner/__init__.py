"""Log compaction (cleanup.policy=compact): ``manager.LogCleaner`` schedules passes,
``compactor`` holds the algorithm, ``offset_map`` the bounded key -> offset map,
``batch_rewrite`` the decode/re-encode of one batch."""

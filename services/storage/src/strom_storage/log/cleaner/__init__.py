"""Log compaction (cleanup.policy=compact): ``manager.LogCleaner`` schedules passes,
``compactor`` holds the algorithm, ``offset_map`` the bounded key -> offset map,
``batch_rewrite`` reads one batch (the re-encoding is ``strom.records.rebuild_batch``)."""

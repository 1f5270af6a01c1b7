"""What every service process runs on: configuration (``config``, ``values``: flags, STROM_*
environment, TOML), structlog ``logs``, OpenTelemetry ``telemetry``, the injectable ``clock``,
``loop_watch`` (how late the event loop ticks), ``allocator`` and ``gc_tuning``. The common
``main`` of a service is ``strom_server.runner``."""

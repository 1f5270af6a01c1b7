"""Where the gateway sends each request, shared by its gRPC and Kafka faces: ``controller``
(the active controller, across failovers), ``leaders`` and ``metadata_cache`` (partition
leaders), ``coordinators`` and ``coordinator_registry`` (group and transaction coordinators),
``data_path``, ``produce_stream`` and ``wire`` (produce and fetch relayed without parsing
records), ``byte_budget`` (memory held by requests in flight) and ``log_dirs``."""

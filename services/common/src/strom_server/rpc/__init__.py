"""gRPC plumbing: the server bootstrap (``server``), interceptors, the one exception -> status
mapping (``errors``), service-to-service ``channels``, methods served from raw request bytes
(``raw_methods``), the health probe, and the protobuf wire readers of the data path
(``protowire``, ``produce_request``)."""

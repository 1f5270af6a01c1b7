"""The gateway's gRPC face: the public ``StromGateway`` service (``servicer``: a table of
forwarded RPCs and the few written by hand) and the thin-client record RPCs (``record_rpcs``).
Both translate to the routers of ``strom_gateway.routing``."""

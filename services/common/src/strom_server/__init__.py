"""Server plumbing shared by every Strom service, by concern: ``etcd`` (the etcd client, key
layout and server process), ``rpc`` (gRPC server, interceptors, errors -> statuses, channels),
``runtime`` (configuration, logs, telemetry, clock), ``runner`` (a service's ``main``) and
``local`` (local clusters and their supervision: ``strom cluster ...``). Services depend on it;
the client library never does."""

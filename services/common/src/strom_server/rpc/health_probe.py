"""Blocking readiness probe of a Strom service: the standard gRPC health check."""

from __future__ import annotations

from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

__all__ = ["grpc_serving"]


def grpc_serving(
    address: str, service: str = "", timeout_s: float = 1.0, *, cafile: str | None = None
) -> bool:
    """Whether the gRPC server at ``address`` (host:port) reports ``service`` SERVING; over
    TLS trusting ``cafile`` when given (the health service needs no login)."""
    if cafile:
        credentials = grpc.ssl_channel_credentials(Path(cafile).read_bytes())
        opened = grpc.secure_channel(address, credentials)
    else:
        opened = grpc.insecure_channel(address)
    with opened as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=service), timeout=timeout_s
            )
        except grpc.RpcError:
            return False
    return reply.status == health_pb2.HealthCheckResponse.SERVING


def main(argv: list[str] | None = None) -> int:
    """``python -m strom_server.rpc.health_probe HOST:PORT [SERVICE]``: exit 0 when SERVING (the
    containers' health check)."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    if not 1 <= len(args) <= 2:
        print("usage: python -m strom_server.rpc.health_probe HOST:PORT [SERVICE]", file=sys.stderr)
        return 2
    service = args[1] if len(args) == 2 else ""
    return 0 if grpc_serving(args[0], service, timeout_s=3.0) else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""Blocking readiness probe of a Strom service: the standard gRPC health check."""

from __future__ import annotations

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

__all__ = ["grpc_serving"]


def grpc_serving(address: str, service: str = "", timeout_s: float = 1.0) -> bool:
    """Whether the gRPC server at ``address`` (host:port) reports ``service`` SERVING."""
    with grpc.insecure_channel(address) as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=service), timeout=timeout_s
            )
        except grpc.RpcError:
            return False
    return reply.status == health_pb2.HealthCheckResponse.SERVING

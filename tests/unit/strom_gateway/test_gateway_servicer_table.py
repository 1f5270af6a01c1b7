"""The Gateway servicer's RPCs: each one in the proto is forwarded by a ``FORWARDED`` entry or
written by hand (never left to the generated base, which answers UNIMPLEMENTED), and each
entry names an RPC and a router method that exist."""

from __future__ import annotations

import inspect

from strom.protocol.v1 import gateway_pb2, gateway_pb2_grpc
from strom_gateway.api.record_rpcs import RecordRpcs
from strom_gateway.api.servicer import FORWARDED, GatewayServicer, To
from strom_gateway.routing.coordinators import CoordinatorRouter
from strom_gateway.routing.data_path import DataPath

RPCS = [m.name for m in gateway_pb2.DESCRIPTOR.services_by_name["Gateway"].methods]
#: The router class whose method a route names.
ROUTERS = {To.COORDINATORS: CoordinatorRouter, To.DATA: DataPath, To.RECORDS: RecordRpcs}


def test_every_gateway_rpc_is_forwarded_or_written_by_hand() -> None:
    assert "ProduceStream" in RPCS and "DescribeStagedCommit" in RPCS  # the walk finds them
    base = gateway_pb2_grpc.GatewayServicer
    missing = [rpc for rpc in RPCS if getattr(GatewayServicer, rpc) is getattr(base, rpc)]
    assert not missing, f"add to servicer.FORWARDED or write a method for {missing}"
    for rpc in RPCS:
        method = getattr(GatewayServicer, rpc)
        assert inspect.iscoroutinefunction(method) or inspect.isasyncgenfunction(method), rpc


def test_forwarded_entries_name_real_rpcs_and_router_methods() -> None:
    assert set(FORWARDED) <= set(RPCS), set(FORWARDED) - set(RPCS)
    for rpc, route in FORWARDED.items():
        assert GatewayServicer.__dict__[rpc].__name__ == rpc
        router = ROUTERS.get(route.to)
        if router is None:
            assert not route.method, f"{rpc}: {route.to} calls the RPC of the same name"
        else:
            assert inspect.iscoroutinefunction(getattr(router, route.method, None)), rpc

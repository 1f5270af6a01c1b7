"""Ports handed to test and benchmark clusters: free, and below the ephemeral range."""

from __future__ import annotations

import socket
from pathlib import Path

from strom_server.local import free_ports


def _ephemeral_start() -> int:
    return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])


def test_a_range_is_free_and_below_the_ephemeral_ports() -> None:
    for _ in range(20):
        base = free_ports.free_port_range(7)
        assert base >= free_ports.LOWEST and base + 7 <= _ephemeral_start()
        for port in range(base, base + 7):
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", port))


def test_a_port_in_use_is_reported() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", free_ports.free_port()))
        listener.listen()
        assert free_ports.port_in_use("127.0.0.1", listener.getsockname()[1])

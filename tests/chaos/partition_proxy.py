"""A fault-injecting TCP proxy in front of every server process of a local cluster: the
partition nemesis cuts links between processes through it (see partitions.py).

Run as its own process (``python partition_proxy.py CONFIG``; CONFIG is a JSON file naming the
control socket and the routes ``{"name", "listen", "target"}``), so forwarding never competes
with the workload for the test process's GIL. Each route listens on a process's public port
(the one it advertises in etcd and everybody dials) and forwards to the port it really listens
on.

Every process runs on 127.0.0.1, so an address says nothing about who dialled. The proxy asks
the kernel instead: the accepted connection's peer port names a socket in ``/proc/net/tcp``,
whose inode appears among the file descriptors of exactly one process; that process's command
line names it (``storage-2``, ``controller-1``, ``coordinator-2``, ``etcd``, ``gateway``).
Only children of the proxy's parent (the test process) are candidates; a socket of anybody
else, the test process and the workload's subprocesses included, is a ``client``.

A cut link behaves like a network partition, not like a crashed peer: bytes stop flowing in
both directions (existing connections stall, new ones are accepted and then hear nothing), so
each side learns of it only through its own timeouts and keep-alives. Healing closes every
connection that lived through a cut (its byte stream lost data) and lets new ones through.

Control: one JSON request per line on a Unix socket, one JSON answer per line:
``{"op": "block", "pairs": [[a, b], ...]}`` (cuts are symmetric, added to the current ones),
``{"op": "heal"}``, ``{"op": "stats"}`` (connections per (source, destination), open ones
marked cut).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHUNK = 256 * 1024
CLIENT = "client"

# -- who is dialling ------------------------------------------------------------------------------


def _process_name(cmdline: list[str]) -> str | None:
    """The cluster role a command line runs, or None."""
    if not cmdline:
        return None
    if Path(cmdline[0]).name == "etcd":
        return "etcd"
    flags = {"strom_storage": "--node-id", "strom_controller": "--controller-id",
             "strom_coordinator": "--coordinator-id"}  # fmt: skip
    for module, flag in flags.items():
        if module in cmdline and flag in cmdline:
            role = module.removeprefix("strom_")
            return f"{role}-{cmdline[cmdline.index(flag) + 1]}"
    if "strom_gateway" in cmdline:
        return "gateway"
    return None


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            return file.read()
    except OSError:
        return ""


def _socket_inode(peer_port: int, local_port: int) -> int | None:
    """Inode of the socket 127.0.0.1:peer_port -> 127.0.0.1:local_port (the dialler's end)."""
    # gRPC dials from dual-stack sockets: those are in tcp6, as v4-mapped ::ffff:127.0.0.1
    for table, address in (("tcp", "0100007F"), ("tcp6", "0000000000000000FFFF00000100007F")):
        wanted_local = f"{address}:{peer_port:04X}"
        wanted_remote = f"{address}:{local_port:04X}"
        for line in _read(f"/proc/net/{table}").splitlines()[1:]:
            fields = line.split()
            if len(fields) > 9 and fields[1] == wanted_local and fields[2] == wanted_remote:
                return int(fields[9])
    return None


def _candidates(parent: int) -> dict[int, str]:
    """pid -> role of the parent's children that run a cluster process."""
    found: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        stat = _read(f"/proc/{entry}/stat")
        after_name = stat.rpartition(")")[2].split()
        if len(after_name) < 2 or int(after_name[1]) != parent:
            continue
        name = _process_name(_read(f"/proc/{entry}/cmdline").split("\0"))
        if name is not None:
            found[int(entry)] = name
    return found


def _owns(pid: int, inode: int) -> bool:
    target = f"socket:[{inode}]"
    try:
        descriptors = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in descriptors:
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                return True
    return False


def identify(peer_port: int, local_port: int, parent: int) -> str:
    """The role of the process that opened the connection from ``peer_port``."""
    inode = _socket_inode(peer_port, local_port)
    if inode is None:
        return CLIENT
    for pid, name in _candidates(parent).items():
        if _owns(pid, inode):
            return name
    return CLIENT


# -- forwarding -----------------------------------------------------------------------------------


@dataclass(eq=False)
class Link:
    """One proxied connection."""

    source: str
    destination: str
    writers: list[asyncio.StreamWriter] = field(default_factory=list)
    cut: bool = False

    def close(self) -> None:
        for writer in self.writers:
            with contextlib.suppress(Exception):
                writer.transport.abort()


class Proxy:
    def __init__(self, routes: list[dict[str, Any]]) -> None:
        self.routes = routes
        self.blocked: set[frozenset[str]] = set()
        self.links: set[Link] = set()
        self.opened: Counter[tuple[str, str]] = Counter()
        self._parent = os.getppid()
        self._servers: list[asyncio.AbstractServer] = []

    def is_blocked(self, source: str, destination: str) -> bool:
        return frozenset((source, destination)) in self.blocked

    async def start(self) -> None:
        for route in self.routes:
            server = await asyncio.start_server(
                lambda r, w, route=route: self._accept(r, w, route),
                "127.0.0.1",
                int(route["listen"]),
                reuse_address=True,
            )
            self._servers.append(server)

    async def _accept(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, route: dict[str, Any]
    ) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        peer_port = writer.get_extra_info("peername")[1]
        source = await asyncio.to_thread(identify, peer_port, int(route["listen"]), self._parent)
        link = Link(source, str(route["name"]), [writer])
        self.opened[(link.source, link.destination)] += 1
        self.links.add(link)
        try:
            if self.is_blocked(link.source, link.destination):
                link.cut = True
                await self._swallow(reader, link)  # the dialled side never hears of it
                return
            try:
                up_reader, up_writer = await asyncio.open_connection(
                    "127.0.0.1", int(route["target"])
                )
            except OSError:
                return
            up_sock = up_writer.get_extra_info("socket")
            if up_sock is not None:
                up_sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            link.writers.append(up_writer)
            await asyncio.gather(
                self._pump(reader, up_writer, link), self._pump(up_reader, writer, link)
            )
        finally:
            self.links.discard(link)
            link.close()

    async def _swallow(self, reader: asyncio.StreamReader, link: Link) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while await reader.read(CHUNK):
                pass

    async def _pump(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, link: Link
    ) -> None:
        try:
            while data := await reader.read(CHUNK):
                if link.cut or self.is_blocked(link.source, link.destination):
                    link.cut = True
                    continue  # dropped on the floor, as a partitioned network does
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            link.close()

    def block(self, pairs: list[list[str]]) -> None:
        for a, b in pairs:
            self.blocked.add(frozenset((a, b)))
        for link in self.links:
            if self.is_blocked(link.source, link.destination):
                link.cut = True

    def heal(self) -> int:
        self.blocked.clear()
        cut = [link for link in self.links if link.cut]
        for link in cut:
            link.close()
        return len(cut)

    def stats(self) -> dict[str, Any]:
        open_links = Counter(f"{l.source}->{l.destination}" for l in self.links)  # noqa: E741
        return {
            "opened": {f"{s}->{d}": n for (s, d), n in sorted(self.opened.items())},
            "open": dict(open_links),
            "cut": sum(link.cut for link in self.links),
            "blocked": sorted(sorted(pair) for pair in self.blocked),
        }

    async def control(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while line := await reader.readline():
                request = json.loads(line)
                op = request.get("op")
                answer: dict[str, Any]
                if op == "block":
                    self.block(request["pairs"])
                    answer = {"ok": True}
                elif op == "heal":
                    answer = {"ok": True, "closed": self.heal()}
                elif op == "stats":
                    answer = {"ok": True, **self.stats()}
                else:
                    answer = {"ok": False, "error": f"unknown op {op!r}"}
                writer.write(json.dumps(answer).encode() + b"\n")
                await writer.drain()
        finally:
            writer.close()


async def serve(config: dict[str, Any]) -> None:
    proxy = Proxy(config["routes"])
    await proxy.start()
    control_path = str(config["control"])
    with contextlib.suppress(FileNotFoundError):
        os.unlink(control_path)
    server = await asyncio.start_unix_server(proxy.control, control_path)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(serve(json.loads(Path(sys.argv[1]).read_text())))

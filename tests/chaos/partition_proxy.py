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
else, the test process and the workload's subprocesses included, is a ``client``. One scan
of ``/proc`` taken after a connection was accepted serves every connection accepted before
it, so the burst of reconnections after a heal costs one scan, not one each.

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
import time
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


_LOOPBACK = ("0100007F", "0000000000000000FFFF00000100007F")  # 127.0.0.1, ::ffff:127.0.0.1


def _loopback_sockets() -> dict[tuple[int, int], int]:
    """(local port, remote port) -> inode of every loopback TCP socket. gRPC dials from
    dual-stack sockets: those are in tcp6, as v4-mapped ::ffff:127.0.0.1."""
    found: dict[tuple[int, int], int] = {}
    for table in ("tcp6", "tcp"):
        for line in _read(f"/proc/net/{table}").splitlines()[1:]:
            fields = line.split()
            if len(fields) <= 9:
                continue
            local, _, local_port = fields[1].partition(":")
            remote, _, remote_port = fields[2].partition(":")
            if local in _LOOPBACK and remote in _LOOPBACK:
                found[(int(local_port, 16), int(remote_port, 16))] = int(fields[9])
    return found


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


def _socket_inodes(pid: int) -> set[int]:
    found: set[int] = set()
    try:
        descriptors = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return found
    for fd in descriptors:
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if target.startswith("socket:["):
                found.add(int(target[8:-1]))
    return found


@dataclass
class Snapshot:
    """Who owns which loopback socket, as of ``taken_at``."""

    taken_at: float
    sockets: dict[tuple[int, int], int]
    roles: dict[int, str]  # socket inode -> role of its process ("client": the test process)

    def role(self, peer_port: int, local_port: int) -> str | None:
        """The dialler's role; None when the snapshot cannot tell."""
        inode = self.sockets.get((peer_port, local_port))
        return None if inode is None else self.roles.get(inode)


def take_snapshot(parent: int, processes: dict[int, str]) -> Snapshot:
    """The socket tables and the sockets of ``processes`` (pid -> role) and of ``parent``."""
    taken_at = time.monotonic()
    sockets = _loopback_sockets()
    roles = {inode: CLIENT for inode in _socket_inodes(parent)}
    for pid, name in processes.items():
        roles.update(dict.fromkeys(_socket_inodes(pid), name))
    return Snapshot(taken_at, sockets, roles)


class Identifier:
    """Finds who opened a connection from a snapshot of the kernel's socket tables taken after
    the connection was accepted. Connections accepted together share one snapshot, so a burst
    of reconnections (after a heal) costs one scan of ``/proc``, not one each."""

    def __init__(self, parent: int) -> None:
        self.parent = parent
        self.processes: dict[int, str] = {}
        self._latest = Snapshot(0.0, {}, {})
        self._taking: asyncio.Task[Snapshot] | None = None

    async def identify(self, peer_port: int, local_port: int, accepted_at: float) -> str:
        looked_for_processes = False
        while True:
            if self._latest.taken_at >= accepted_at:
                role = self._latest.role(peer_port, local_port)
                if role is not None:
                    return role
                if self._latest.sockets.get((peer_port, local_port)) is None:
                    return CLIENT  # gone already
                if looked_for_processes:
                    return CLIENT  # a process that is no cluster process: the workload's
                # A process started since we last looked (a restart): look, then ask again.
                self.processes = await asyncio.to_thread(_candidates, self.parent)
                looked_for_processes = True
                accepted_at = time.monotonic()
            if self._taking is None or self._taking.done():
                self._taking = asyncio.ensure_future(
                    asyncio.to_thread(take_snapshot, self.parent, dict(self.processes))
                )
            snapshot = await self._taking
            if snapshot.taken_at > self._latest.taken_at:
                self._latest = snapshot


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
        self._identifier = Identifier(os.getppid())
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
        started = time.monotonic()
        source = await self._identifier.identify(peer_port, int(route["listen"]), started)
        if time.monotonic() - started > 1:
            print(f"slow: {time.monotonic() - started:.1f} s to identify {source}", flush=True)
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

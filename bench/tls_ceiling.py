"""The ceiling of TLS on this machine, for bench/security.py: what TLS costs bare gRPC and a bare
socket, measured the way the benchmark measures Strom. Run alone
(``.venv/bin/python bench/tls_ceiling.py [--quick]``) it prints these figures and their
TLS/plaintext ratios; bench/security.py measures them beside Strom in the same rounds.

A server process (``python bench/tls_ceiling.py SERVE CERT KEY``) listens four times on
loopback: a trivial grpc.aio servicer (a ``ProduceRequest`` with one 1 MiB ``bytes`` field in,
taken as raw bytes as the storage node takes it, an empty ``ProduceResponse`` out; no Strom
code) plaintext and with TLS, and a raw socket sink
(reads 1 MiB, answers 8 bytes) plaintext and with TLS; it prints its ports as one JSON line.
The client side sends the same 1 MiB payloads as Strom's produce benchmark, 4 in flight:
``grpc_mib_s`` and ``socket_mib_s`` for each protocol, and ``grpc_tls_token_mib_s``: TLS with a
bearer token on every call as gRPC call credentials, as Strom's clients send theirs (a
Python metadata plugin per call; the server does not look at it). ``aes_128_gcm_mib_s`` is the
cipher alone (``cryptography``'s AES-128-GCM sealing 1 MiB at a time, one core): what TLS
would cost if encryption were all it did. Both ends use the same
certificate and CA as the secure cluster (``LocalCa``); gRPC uses its BoringSSL, the socket
Python's OpenSSL.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import socket
import socketserver
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
from benchkit import bench_arguments, print_summary, progress, work_dir
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from strom.protocol.v1 import storage_pb2
from strom_server.security.certificates import LocalCa

__all__ = ["Ceiling", "measure_ceiling", "running_ceiling"]

MiB = 1024 * 1024
METHOD = "/bench.Sink/Put"
ACK = b"received"
IN_FLIGHT = 4
_OPTIONS = [
    ("grpc.max_receive_message_length", 16 * MiB),
    ("grpc.max_send_message_length", 16 * MiB),
]


@dataclass(frozen=True)
class Ceiling:
    ports: dict[str, int]
    cafile: Path
    ca: bytes


# -- the server process ---------------------------------------------------------------------


async def _put(
    request: storage_pb2.ProduceRequest, _context: object
) -> storage_pb2.ProduceResponse:
    return storage_pb2.ProduceResponse()


class _Sink(socketserver.BaseRequestHandler):
    """Reads 1 MiB messages, answers each with 8 bytes; TLS when the server has a context."""

    def handle(self) -> None:
        sock: socket.socket = self.request
        context = getattr(self.server, "tls", None)
        if context is not None:
            sock = context.wrap_socket(sock, server_side=True)
        buffer = bytearray(MiB)
        view = memoryview(buffer)
        with contextlib.suppress(OSError):
            while True:
                got = 0
                while got < MiB:
                    n = sock.recv_into(view[got:])
                    if n == 0:
                        return
                    got += n
                sock.sendall(ACK)


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    tls: ssl.SSLContext | None = None


async def _serve(certfile: str, keyfile: str, pair: list[tuple[bytes, bytes]]) -> None:
    handler = grpc.method_handlers_generic_handler(
        "bench.Sink",
        {
            # Raw bytes in, as the storage node takes Produce (no parse copy).
            "Put": grpc.unary_unary_rpc_method_handler(
                _put, response_serializer=storage_pb2.ProduceResponse.SerializeToString
            )
        },
    )
    server = grpc.aio.server(options=_OPTIONS)
    server.add_generic_rpc_handlers((handler,))
    ports = {
        "grpc_plaintext": server.add_insecure_port("127.0.0.1:0"),
        "grpc_tls": server.add_secure_port("127.0.0.1:0", grpc.ssl_server_credentials(pair)),
    }
    await server.start()
    for name, tls in (("socket_plaintext", False), ("socket_tls", True)):
        sink = _Server(("127.0.0.1", 0), _Sink)
        if tls:
            sink.tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            sink.tls.load_cert_chain(certfile, keyfile)
        ports[name] = sink.server_address[1]
        threading.Thread(target=sink.serve_forever, daemon=True).start()
    print(json.dumps(ports), flush=True)
    await server.wait_for_termination()


# -- the client side ------------------------------------------------------------------------


@contextlib.contextmanager
def running_ceiling(certfile: Path, keyfile: Path, cafile: Path) -> Iterator[Ceiling]:
    """The server process, stopped at the end."""
    process = subprocess.Popen(
        [sys.executable, __file__, "SERVE", str(certfile), str(keyfile)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line:
            raise RuntimeError("the TLS ceiling server did not start")
        yield Ceiling(json.loads(line), cafile, cafile.read_bytes())
    finally:
        process.terminate()
        process.wait(10)


async def _grpc_mib_s(address: str, credentials: grpc.ChannelCredentials | None,
                      payload: bytes, batches: int) -> float:  # fmt: skip
    if credentials is None:
        channel = grpc.aio.insecure_channel(address, options=_OPTIONS)
    else:
        channel = grpc.aio.secure_channel(address, credentials, options=_OPTIONS)
    put = channel.unary_unary(
        METHOD,
        request_serializer=storage_pb2.ProduceRequest.SerializeToString,
        response_deserializer=storage_pb2.ProduceResponse.FromString,
    )
    request = storage_pb2.ProduceRequest(
        acks=1, timeout_ms=30000,
        partitions=[storage_pb2.ProducePartitionData(topic="t", partition=0, records=payload)],
    )  # fmt: skip
    try:
        await put(request, timeout=60)  # warm up: connection, handshake
        queue = list(range(batches))

        async def worker() -> None:
            while queue:
                queue.pop()
                await put(request, timeout=60)

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))
        return len(payload) * batches / MiB / (time.perf_counter() - started)
    finally:
        await channel.close()


def _socket_mib_s(port: int, context: ssl.SSLContext | None, payload: bytes, batches: int) -> float:
    raw = socket.create_connection(("127.0.0.1", port), timeout=60)
    sock = context.wrap_socket(raw, server_hostname="localhost") if context else raw
    with sock:

        def ack() -> None:
            got = b""
            while len(got) < len(ACK):
                chunk = sock.recv(len(ACK) - len(got))
                if not chunk:
                    raise RuntimeError("the sink closed the connection")
                got += chunk

        sock.sendall(payload)  # warm up
        ack()
        started = time.perf_counter()
        sent = 0
        for _ in range(min(IN_FLIGHT, batches)):
            sock.sendall(payload)
            sent += 1
        for _ in range(batches):
            ack()
            if sent < batches:
                sock.sendall(payload)
                sent += 1
        return len(payload) * batches / MiB / (time.perf_counter() - started)


def _cipher_mib_s(payload: bytes, seconds: float = 0.3) -> float:
    aead = AESGCM(AESGCM.generate_key(bit_length=128))
    nonce = bytes(12)  # the same nonce is fine for a speed test, never for real data
    done, started = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - started) < seconds:
        aead.encrypt(nonce, payload, None)
        done += len(payload)
    return done / MiB / elapsed


def _static_token(
    _context: grpc.AuthMetadataContext, callback: grpc.AuthMetadataPluginCallback
) -> None:
    callback((("authorization", "Bearer bench-token"),), None)


async def measure_ceiling(ceiling: Ceiling, payload: bytes, batches: int) -> dict[str, float]:
    """MiB/s of bare gRPC and of a bare socket, plaintext and TLS."""
    ports = ceiling.ports
    credentials = grpc.ssl_channel_credentials(ceiling.ca)
    context = ssl.create_default_context(cafile=str(ceiling.cafile))
    figures = {
        "grpc_plaintext_mib_s": await _grpc_mib_s(
            f"127.0.0.1:{ports['grpc_plaintext']}", None, payload, batches
        ),
        "grpc_tls_mib_s": await _grpc_mib_s(
            f"localhost:{ports['grpc_tls']}", credentials, payload, batches
        ),
        "grpc_tls_token_mib_s": await _grpc_mib_s(
            f"localhost:{ports['grpc_tls']}",
            grpc.composite_channel_credentials(
                credentials, grpc.metadata_call_credentials(_static_token)
            ),
            payload,
            batches,
        ),
    }
    chunk = payload[:MiB].ljust(MiB, b"\0")  # the sink reads 1 MiB messages
    figures["aes_128_gcm_mib_s"] = _cipher_mib_s(chunk)
    figures["socket_plaintext_mib_s"] = await asyncio.to_thread(
        _socket_mib_s, ports["socket_plaintext"], None, chunk, batches
    )
    figures["socket_tls_mib_s"] = await asyncio.to_thread(
        _socket_mib_s, ports["socket_tls"], context, chunk, batches
    )
    return figures


def run(quick: bool, keep: bool) -> dict[str, Any]:
    """The ceiling alone (``make bench`` runs every bench/*.py): the same figures
    bench/security.py measures beside Strom, with TLS/plaintext ratios, best of 2 rounds."""
    batches = 60 if quick else 300
    payload = random.randbytes(MiB)
    with work_dir("strom-bench-tls-ceiling-", keep) as workdir:
        ca = LocalCa(workdir / "ca")
        sink = ca.issue("sink")
        with running_ceiling(sink.certfile, sink.keyfile, ca.cafile) as ceiling:
            rounds = [asyncio.run(measure_ceiling(ceiling, payload, batches)) for _ in range(2)]
    best = {name: max(r[name] for r in rounds) for name in rounds[0]}
    ratios = {
        "grpc_tls_vs_plaintext": best["grpc_tls_mib_s"] / best["grpc_plaintext_mib_s"],
        "grpc_tls_token_vs_plaintext": best["grpc_tls_token_mib_s"] / best["grpc_plaintext_mib_s"],
        "socket_tls_vs_plaintext": best["socket_tls_mib_s"] / best["socket_plaintext_mib_s"],
    }
    for name, value in {**best, **ratios}.items():
        progress(f"{name}: {value:,.2f}")
    return {"quick": quick, "batches": batches, **best, "ratios": ratios}


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "SERVE":  # the server process of running_ceiling
        cert, key = sys.argv[2], sys.argv[3]
        asyncio.run(_serve(cert, key, [(Path(key).read_bytes(), Path(cert).read_bytes())]))
    else:
        arguments = bench_arguments(__doc__ or "", "fewer batches (under a minute)").parse_args()
        print_summary(lambda: run(arguments.quick, arguments.keep))

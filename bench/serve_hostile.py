"""Hostile clients of `mlk serve` for bench/serve_hostile.sh (not a test).

Runs for SECONDS, then stops by itself, and prints one JSON line of what it
did. Loopback only: it connects to 127.0.0.1:PORT from the source addresses
127.0.0.2 and up (one per kind below), so that the server's per-address cap
applies to them and not to the honest clients on 127.0.0.1. Every kind is
bounded in connections and paced, so that the run measures the server's
defences, not a CPU race on a shared machine:

- idle:    400 sockets that connect and send nothing (reconnected when closed)
- slow:    60 connections sending one header line every 2 s
- trickle: 20 uploads with Content-Length 1 MiB sending 16 bytes every 0.5 s
- big:     uploads claiming 1 GiB (413 expected), and chunked ones (411)
- nested:  PUT /v1/entries/KEY of an array nested 100,000 deep (200 KB)
- ranges:  GET of a blob with 300 overlapping ranges
- headers: a request with 5,000 header fields

With the hostile team's tokens (its own namespace, a quota; issue 49):

- metadata: entries without files and with 900 KiB of metadata, new keys
            (507 once the quota is spent), and with 2 MiB (413)
- bench:    benchmark reports of 10,000 kernels with a 512 KiB machine
            record (507 once the quota is spent)
- history:  the read token asks for 10,000 rows of the history
- ro_trickle: 6 uploads of 60 MiB by the read token, trickled (403 at once)
- readers:  40 connections that ask for the team's 8 MiB blob with a 4 KiB
            receive buffer and never read (503 past the token's share)
- writes:   8 concurrent writers of the write token (blobs of 256 KiB and
            entries, no pause)
- healthz:  /healthz from 127.0.0.1 every 0.2 s: the latencies (ms) of its answers

$MLK_HOSTILE_KINDS (a comma-separated list of the kinds above) runs only those.

usage: serve_hostile.py PORT TOKEN BLOB_DIGEST SECONDS MAL_TOKEN MAL_READ_TOKEN MAL_BLOB_DIGEST
"""
import asyncio
import hashlib
import json
import os
import socket
import sys
import time

PORT, TOKEN, BLOB, SECONDS = int(sys.argv[1]), sys.argv[2], sys.argv[3], float(sys.argv[4])
MAL, MAL_RO, MAL_BLOB = sys.argv[5], sys.argv[6], sys.argv[7]
latencies = []
END = time.monotonic() + SECONDS
stats = {}


def count(kind, what):
    stats.setdefault(kind, {}).setdefault(what, 0)
    stats[kind][what] += 1


async def connect(source):
    return await asyncio.wait_for(asyncio.open_connection("127.0.0.1", PORT, local_addr=(source, 0)), 5)


async def status_of(reader, limit=5.0):
    """The status code of the answer, or 'closed' / 'timeout'."""
    try:
        line = await asyncio.wait_for(reader.readline(), limit)
    except (asyncio.TimeoutError, ConnectionError):
        return "timeout"
    parts = line.split()
    return parts[1].decode() if len(parts) > 1 else "closed"


def close(writer):
    try:
        writer.close()
    except Exception:
        pass


async def idle(source):
    while time.monotonic() < END:
        try:
            reader, writer = await connect(source)
        except (OSError, asyncio.TimeoutError):
            count("idle", "refused")
            await asyncio.sleep(0.5)
            continue
        count("idle", "opened")
        try:
            await asyncio.wait_for(reader.read(1), max(0.1, END - time.monotonic()))
            count("idle", "closed by server")
        except (asyncio.TimeoutError, ConnectionError):
            pass
        close(writer)
        await asyncio.sleep(0.2)


async def slow(source):
    while time.monotonic() < END:
        try:
            reader, writer = await connect(source)
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
            n = 0
            while time.monotonic() < END:
                await asyncio.sleep(2)
                writer.write(b"X-Slow-%d: y\r\n" % n)
                await writer.drain()
                n += 1
            close(writer)
        except (OSError, asyncio.TimeoutError):
            count("slow", "cut off")
            await asyncio.sleep(0.5)


async def trickle(source):
    while time.monotonic() < END:
        try:
            reader, writer = await connect(source)
            count("trickle", "opened")
            writer.write((f"PUT /ccache/{'7' * 40} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
                          "Content-Length: 1048576\r\n\r\n").encode())
            while time.monotonic() < END:
                writer.write(b"z" * 16)
                await writer.drain()
                await asyncio.sleep(0.5)
                if reader.at_eof():
                    raise ConnectionError
            close(writer)
        except (OSError, asyncio.TimeoutError):
            count("trickle", "cut off")
            await asyncio.sleep(0.5)


async def one_request(kind, source, head, body=b"", pause=0.2):
    while time.monotonic() < END:
        try:
            reader, writer = await connect(source)
            writer.write(head + body)
            await writer.drain()
            count(kind, await status_of(reader))
            close(writer)
        except (OSError, asyncio.TimeoutError):
            count(kind, "error")
        await asyncio.sleep(pause)


def auth(token=None):
    return f"Authorization: Bearer {token or TOKEN}\r\n"


def put(path, body, token, content_type="application/octet-stream"):
    return (f"PUT {path} HTTP/1.1\r\nHost: x\r\n{auth(token)}Content-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


async def exchange(kind, source, request, read_body=True):
    """One request on a new connection; counts its status."""
    try:
        reader, writer = await connect(source)
        writer.write(request)
        await writer.drain()
        count(kind, await status_of(reader, 30.0))
        close(writer)
    except (OSError, asyncio.TimeoutError):
        count(kind, "error")


async def metadata(source, n):
    note = "m" * (900 << 10)
    i = 0
    while time.monotonic() < END:
        i += 1
        big = i % 5 == 0  # every fifth: over --max-manifest
        manifest = {"files": {}, "meta": {"note": note * (3 if big else 1)},
                    "provenance": {"producer": "x", "host": "x", "time": 1, "toolchain": {}, "measured": False}}
        body = json.dumps(manifest).encode()
        await exchange("metadata_big" if big else "metadata", source,
                       put(f"/v1/entries/meta-{n}-{i}", body, MAL, "application/json"))
        await asyncio.sleep(0.5)


async def bench(source):
    kernels = [{"id": f"k{i}", "target": "host", "cache_key": "c", "variant": "v", "mlk": {"median_ms": 1.0}}
               for i in range(10000)]
    report = json.dumps({"format": "mlk-bench", "machine": {"blob": "b" * (512 << 10)}, "versions": {},
                         "kernels": kernels}).encode()
    req = (f"POST /v1/bench/results HTTP/1.1\r\nHost: x\r\n{auth(MAL)}Content-Type: application/json\r\n"
           f"Content-Length: {len(report)}\r\n\r\n").encode() + report
    while time.monotonic() < END:
        await exchange("bench", source, req)
        await asyncio.sleep(1.0)


async def history(source):
    req = f"GET /v1/bench/history?limit=10000 HTTP/1.1\r\nHost: x\r\n{auth(MAL_RO)}Connection: close\r\n\r\n".encode()
    while time.monotonic() < END:
        await exchange("history", source, req)
        await asyncio.sleep(1.0)


async def ro_trickle(source):
    while time.monotonic() < END:
        try:
            reader, writer = await connect(source)
            writer.write((f"PUT /v1/blobs/{'a' * 64} HTTP/1.1\r\nHost: x\r\n{auth(MAL_RO)}"
                          "Content-Length: 62914560\r\n\r\n").encode())
            await writer.drain()
            count("ro_trickle", await status_of(reader))
            close(writer)
        except (OSError, asyncio.TimeoutError):
            count("ro_trickle", "error")
        await asyncio.sleep(0.5)


async def reader(source):
    while time.monotonic() < END:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.bind((source, 0))
        sock.setblocking(False)
        try:
            await asyncio.wait_for(asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", PORT)), 5)
            r, w = await asyncio.open_connection(sock=sock)
            w.write(f"GET /v1/blobs/{MAL_BLOB} HTTP/1.1\r\nHost: x\r\n{auth(MAL_RO)}\r\n".encode())
            await w.drain()
            status = await status_of(r)
            count("readers", status)
            # Never read the rest: the answer stays in the server until it gives up on us.
            await asyncio.sleep(max(0.1, min(35.0, END - time.monotonic())) if status == "200" else 0.5)
            close(w)
        except (OSError, asyncio.TimeoutError):
            count("readers", "error")
            sock.close()
            await asyncio.sleep(0.5)


async def writes(source, n):
    i = 0
    while time.monotonic() < END:
        i += 1
        body = os.urandom(256 << 10)
        digest = hashlib.sha256(body).hexdigest()
        await exchange("writes", source, put(f"/v1/blobs/{digest}", body, MAL))
        manifest = {"files": {"b": {"digest": digest, "size": len(body)}}, "meta": {},
                    "provenance": {"producer": "x", "host": "x", "time": 1, "toolchain": {}, "measured": False}}
        await exchange("writes", source, put(f"/v1/entries/w-{n}-{i}", json.dumps(manifest).encode(), MAL,
                                             "application/json"))


async def healthz():
    while time.monotonic() < END:
        t0 = time.monotonic()
        try:
            r, w = await asyncio.open_connection("127.0.0.1", PORT)
            w.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            await w.drain()
            status = await status_of(r, 10.0)
            close(w)
        except (OSError, asyncio.TimeoutError):
            status = "error"
        count("healthz", status)
        if status == "200":
            latencies.append((time.monotonic() - t0) * 1000)
        await asyncio.sleep(0.2)


async def main():
    nested = b"[" * 100000 + b"]" * 100000
    ranges = "bytes=" + ",".join("0-" for _ in range(300))
    many = "".join(f"X-H{i}: v\r\n" for i in range(5000))
    kinds = {
        "idle": lambda: [idle("127.0.0.2") for _ in range(200)] + [idle("127.0.0.3") for _ in range(200)],
        "slow": lambda: [slow("127.0.0.4") for _ in range(60)],
        "trickle": lambda: [trickle("127.0.0.5") for _ in range(20)],
        "big": lambda: [one_request("big", "127.0.0.6", (f"PUT /v1/blobs/{'0' * 64} HTTP/1.1\r\nHost: x\r\n{auth()}"
                                                         "Content-Length: 1073741824\r\n\r\n").encode(), b"y" * 65536)
                        for _ in range(2)],
        "chunked": lambda: [one_request("chunked", "127.0.0.6", (f"PUT /ccache/{'8' * 40} HTTP/1.1\r\nHost: x\r\n{auth()}"
                                                                 "Transfer-Encoding: chunked\r\n\r\n").encode(),
                                        b"4\r\nabcd\r\n") for _ in range(2)],
        "nested": lambda: [one_request("nested", "127.0.0.7", (f"PUT /v1/entries/nested HTTP/1.1\r\nHost: x\r\n{auth()}"
                                                               f"Content-Type: application/json\r\nContent-Length: "
                                                               f"{len(nested)}\r\n\r\n").encode(), nested, pause=0.5)
                           for _ in range(2)],
        "ranges": lambda: [one_request("ranges", "127.0.0.8", (f"GET /v1/blobs/{BLOB} HTTP/1.1\r\nHost: x\r\n{auth()}"
                                                               f"Range: {ranges}\r\nConnection: close\r\n\r\n").encode())
                           for _ in range(4)],
        "headers": lambda: [one_request("headers", "127.0.0.9",
                                        (f"GET /healthz HTTP/1.1\r\nHost: x\r\n{many}\r\n").encode(), pause=0.5)],
        "metadata": lambda: [metadata("127.0.0.10", n) for n in range(2)],
        "bench": lambda: [bench("127.0.0.11"), history("127.0.0.11")],
        "ro_trickle": lambda: [ro_trickle("127.0.0.12") for _ in range(6)],
        "readers": lambda: [reader("127.0.0.13") for _ in range(40)],
        "writes": lambda: [writes("127.0.0.14", n) for n in range(8)],
    }
    chosen = os.environ.get("MLK_HOSTILE_KINDS", "").split(",") if os.environ.get("MLK_HOSTILE_KINDS") else list(kinds)
    tasks = [healthz()]
    for k in chosen:
        tasks += kinds[k]()
    await asyncio.gather(*tasks, return_exceptions=True)


asyncio.run(main())
lat = sorted(latencies)
stats["healthz_ms"] = {"p50": round(lat[len(lat) // 2], 1), "p99": round(lat[int(len(lat) * 0.99)], 1),
                       "max": round(lat[-1], 1)} if lat else {}
print(json.dumps(stats, sort_keys=True))

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

usage: serve_hostile.py PORT TOKEN BLOB_DIGEST SECONDS
"""
import asyncio
import json
import sys
import time

PORT, TOKEN, BLOB, SECONDS = int(sys.argv[1]), sys.argv[2], sys.argv[3], float(sys.argv[4])
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


def auth():
    return f"Authorization: Bearer {TOKEN}\r\n"


async def main():
    nested = b"[" * 100000 + b"]" * 100000
    ranges = "bytes=" + ",".join("0-" for _ in range(300))
    many = "".join(f"X-H{i}: v\r\n" for i in range(5000))
    tasks = [idle("127.0.0.2") for _ in range(200)] + [idle("127.0.0.3") for _ in range(200)]
    tasks += [slow("127.0.0.4") for _ in range(60)]
    tasks += [trickle("127.0.0.5") for _ in range(20)]
    tasks += [one_request("big", "127.0.0.6", (f"PUT /v1/blobs/{'0' * 64} HTTP/1.1\r\nHost: x\r\n{auth()}"
                                                  "Content-Length: 1073741824\r\n\r\n").encode(), b"y" * 65536)
              for _ in range(2)]
    tasks += [one_request("chunked", "127.0.0.6", (f"PUT /ccache/{'8' * 40} HTTP/1.1\r\nHost: x\r\n{auth()}"
                                                      "Transfer-Encoding: chunked\r\n\r\n").encode(), b"4\r\nabcd\r\n")
              for _ in range(2)]
    tasks += [one_request("nested", "127.0.0.7", (f"PUT /v1/entries/nested HTTP/1.1\r\nHost: x\r\n{auth()}"
                                                     f"Content-Type: application/json\r\nContent-Length: {len(nested)}"
                                                     "\r\n\r\n").encode(), nested, pause=0.5)
              for _ in range(2)]
    tasks += [one_request("ranges", "127.0.0.8", (f"GET /v1/blobs/{BLOB} HTTP/1.1\r\nHost: x\r\n{auth()}"
                                                     f"Range: {ranges}\r\nConnection: close\r\n\r\n").encode())
              for _ in range(4)]
    tasks += [one_request("headers", "127.0.0.9", (f"GET /healthz HTTP/1.1\r\nHost: x\r\n{many}\r\n").encode(), pause=0.5)]
    await asyncio.gather(*tasks, return_exceptions=True)


asyncio.run(main())
print(json.dumps(stats, sort_keys=True))

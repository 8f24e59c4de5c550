#!/usr/bin/env python3
"""A lossy HTTP/1.1 proxy for the clients' tests: it breaks the first requests on purpose.

Usage:
    python3 clients/testing/lossy_proxy.py --target 127.0.0.1:PORT
        [--reset-first-requests N] [--answer-503-first N] [--retry-after-s S]
        [--drop-first-responses N] [--delay-ms N] [--delay-first-responses N]
        [--outage-ms MS] [--outage-faults LIST] [--log FILE]

It listens on a free port of 127.0.0.1, prints ``listening <port>`` as the first line of stdout
(flushed), then serves until it is killed (SIGTERM or SIGINT end it quietly).

Every request is read whole (head, then a Content-Length or chunked body) and numbered in arrival
order across all connections (1, 2, …). Its fate is decided in this fixed order, each fault used up
by the first requests that reach it:

0. ``--outage-ms MS`` — a balancer whose upstreams restart (a rolling restart of two instances):
   for MS milliseconds from the first request, every request meets the next fault of
   ``--outage-faults`` in turn (a comma-separated list of ``drop``, ``reset``, ``502``, ``503``,
   ``504``; default ``drop,502,reset,504,503``). ``drop`` and ``reset`` are as below; ``502``,
   ``503`` and ``504`` are answered by the proxy itself the way a balancer does (an HTML body, no
   Retry-After, ``Connection: close``); the server never sees them. After the outage, requests go on
   to the faults below.
1. ``--reset-first-requests N`` — the first N requests are never forwarded: the client's connection
   is reset (TCP RST). The server never sees them.
2. ``--answer-503-first N`` — the next N requests are never forwarded: the proxy answers
   ``503 unavailable`` itself (a problem document, ``Retry-After: S`` from ``--retry-after-s``,
   default 1) and closes the connection, as a server that lost its database would.
3. ``--drop-first-responses N`` — the next N requests are forwarded and their answers read whole,
   then the client's connection is closed without an answer: the server acted, the client never
   hears of it (a lost answer).
4. Every other request is forwarded and its answer relayed, after ``--delay-ms`` milliseconds
   (default 0) for the first ``--delay-first-responses`` answers (default: every answer) — a client
   whose time-out is shorter gives up, while the server has acted.

Each client connection gets its own upstream connection (so keep-alive is mirrored); when the
server closes its side, the proxy closes the client's after relaying the answer.

``--log FILE`` appends one JSON line per request, written before its fate is carried out:
``{"seq", "method", "target", "body", "fault"}`` where ``fault`` is one of ``reset``, ``503``,
``drop``, ``delay``, ``none``, or during an outage ``outage-drop``, ``outage-reset``, ``outage-502``,
``outage-503``, ``outage-504`` and ``body`` is the request body as text. A test reads it to check
what every attempt sent (e.g. the same request_id each time).

Standard library only (asyncio); Python 3.11+.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import socket
import struct
import sys
import time
from dataclasses import dataclass, field
from typing import IO

HEAD_BYTES_MAX = 64 * 1024
BODY_BYTES_MAX = 64 * 1024 * 1024


class ProtocolError(Exception):
    """The peer sent something that is not an HTTP/1.1 message this proxy can frame."""


@dataclass
class Message:
    """One HTTP message as raw bytes, with the parts the proxy looks at."""

    raw: bytes
    start_line: str
    headers: dict[str, str]
    body: bytes

    def wants_close(self) -> bool:
        return "close" in self.headers.get("connection", "").lower()


async def read_message(reader: asyncio.StreamReader, *, is_response_to_head: bool = False) -> Message | None:
    """Reads one whole message; None on a clean EOF before its first byte."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as e:
        if not e.partial:
            return None
        raise ProtocolError("connection closed inside a message head") from e
    except asyncio.LimitOverrunError as e:
        raise ProtocolError("message head too large") from e
    lines = head[:-4].decode("latin-1").split("\r\n")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    body = b""
    raw_body = b""
    if is_response_to_head:
        pass
    elif "chunked" in headers.get("transfer-encoding", "").lower():
        while True:
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line.split(b";")[0].strip(), 16)
            raw_body += size_line
            if size == 0:
                # Trailers, then the empty line.
                while True:
                    trailer = await reader.readuntil(b"\r\n")
                    raw_body += trailer
                    if trailer == b"\r\n":
                        break
                break
            chunk = await reader.readexactly(size + 2)
            raw_body += chunk
            body += chunk[:-2]
            if len(body) > BODY_BYTES_MAX:
                raise ProtocolError("body too large")
    elif "content-length" in headers:
        length = int(headers["content-length"])
        if length > BODY_BYTES_MAX:
            raise ProtocolError("body too large")
        body = await reader.readexactly(length)
        raw_body = body
    return Message(head + raw_body, lines[0], headers, body)


@dataclass
class Plan:
    """What is left of each fault; shared by every connection (asyncio: one thread)."""

    resets_left: int
    answers_503_left: int
    drops_left: int
    delays_left: int | None  # None: every answer is delayed
    delay_ms: int
    retry_after_s: int
    outage_ms: int = 0
    outage_faults: list[str] = field(default_factory=list)
    outage_started: float | None = None  # time.monotonic() of the first request
    outage_seq: int = 0                  # requests that met the outage so far
    seq: int = 0
    log: IO[str] | None = field(default=None)

    def next_fault(self) -> tuple[int, str]:
        self.seq += 1
        if self.outage_ms > 0:
            now = time.monotonic()
            if self.outage_started is None:
                self.outage_started = now
            if (now - self.outage_started) * 1000 < self.outage_ms:
                fault = self.outage_faults[self.outage_seq % len(self.outage_faults)]
                self.outage_seq += 1
                return self.seq, "outage-" + fault
        if self.resets_left > 0:
            self.resets_left -= 1
            return self.seq, "reset"
        if self.answers_503_left > 0:
            self.answers_503_left -= 1
            return self.seq, "503"
        if self.drops_left > 0:
            self.drops_left -= 1
            return self.seq, "drop"
        if self.delay_ms > 0 and (self.delays_left is None or self.delays_left > 0):
            if self.delays_left is not None:
                self.delays_left -= 1
            return self.seq, "delay"
        return self.seq, "none"

    def record(self, seq: int, request: Message, fault: str) -> None:
        if self.log is None:
            return
        method, _, rest = request.start_line.partition(" ")
        target = rest.rsplit(" ", 1)[0]
        line = {"seq": seq, "method": method, "target": target,
                "body": request.body.decode("utf-8", "replace"), "fault": fault}
        self.log.write(json.dumps(line) + "\n")
        self.log.flush()


def answer_503(retry_after_s: int) -> bytes:
    body = json.dumps({"type": "https://tollgate.dev/errors/unavailable", "title": "Service Unavailable",
                       "status": 503, "code": "unavailable",
                       "detail": "injected by lossy_proxy"}).encode()
    head = ("HTTP/1.1 503 Service Unavailable\r\n"
            "Content-Type: application/problem+json\r\n"
            f"Retry-After: {retry_after_s}\r\n"
            "Connection: close\r\n"
            f"Content-Length: {len(body)}\r\n\r\n")
    return head.encode() + body


BALANCER_REASONS = {502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout"}


def answer_as_balancer(status: int) -> bytes:
    """What a small TCP/HTTP balancer answers when no upstream is there: HTML, no Retry-After."""
    reason = BALANCER_REASONS[status]
    body = f"<html><body><h1>{status} {reason}</h1></body></html>\n".encode()
    head = (f"HTTP/1.1 {status} {reason}\r\n"
            "Content-Type: text/html\r\n"
            "Connection: close\r\n"
            f"Content-Length: {len(body)}\r\n\r\n")
    return head.encode() + body


def reset(writer: asyncio.StreamWriter) -> None:
    """Closes the connection with a TCP RST (SO_LINGER with a zero time-out)."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def close(writer: asyncio.StreamWriter | None) -> None:
    if writer is None or writer.is_closing():
        return
    writer.close()
    try:
        await writer.wait_closed()
    except OSError:
        pass


async def serve_connection(plan: Plan, target: tuple[str, int], client_reader: asyncio.StreamReader,
                           client_writer: asyncio.StreamWriter) -> None:
    upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
    try:
        while True:
            request = await read_message(client_reader)
            if request is None:
                break
            seq, fault = plan.next_fault()
            plan.record(seq, request, fault)
            if fault in ("outage-502", "outage-503", "outage-504"):
                client_writer.write(answer_as_balancer(int(fault[-3:])))
                await client_writer.drain()
                break
            fault = fault.removeprefix("outage-")  # outage-drop and outage-reset: as drop and reset
            if fault == "reset":
                reset(client_writer)
                return
            if fault == "503":
                client_writer.write(answer_503(plan.retry_after_s))
                await client_writer.drain()
                break
            if upstream is None:
                upstream = await asyncio.open_connection(*target)
            up_reader, up_writer = upstream
            up_writer.write(request.raw)
            await up_writer.drain()
            is_head = request.start_line.startswith("HEAD ")
            answer = await read_message(up_reader, is_response_to_head=is_head)
            if answer is None:
                break  # the server closed without answering: so does the proxy
            if fault == "drop":
                break
            if fault == "delay":
                await asyncio.sleep(plan.delay_ms / 1000)
            client_writer.write(answer.raw)
            await client_writer.drain()
            if answer.wants_close() or request.wants_close():
                break
    except (ProtocolError, ConnectionError, asyncio.IncompleteReadError, ValueError, OSError) as e:
        print(f"lossy_proxy: connection ended: {e!r}", file=sys.stderr, flush=True)
    finally:
        if upstream is not None:
            await close(upstream[1])
        await close(client_writer)


def parse_target(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"--target must be HOST:PORT, not {text!r}")
    return host, int(port)


def non_negative(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, not {text!r}")
    return int(text)


OUTAGE_FAULTS = ("drop", "reset", "502", "503", "504")
DEFAULT_OUTAGE_FAULTS = "drop,502,reset,504,503"


def outage_faults(text: str) -> list[str]:
    faults = text.split(",")
    for fault in faults:
        if fault not in OUTAGE_FAULTS:
            raise argparse.ArgumentTypeError(f"{fault!r} is not one of {', '.join(OUTAGE_FAULTS)}")
    return faults


async def main_async(args: argparse.Namespace) -> None:
    log = open(args.log, "a", encoding="utf-8") if args.log else None
    plan = Plan(resets_left=args.reset_first_requests, answers_503_left=args.answer_503_first,
                drops_left=args.drop_first_responses, delays_left=args.delay_first_responses,
                delay_ms=args.delay_ms, retry_after_s=args.retry_after_s, outage_ms=args.outage_ms,
                outage_faults=args.outage_faults, log=log)
    server = await asyncio.start_server(
        lambda r, w: serve_connection(plan, args.target, r, w), "127.0.0.1", 0, limit=HEAD_BYTES_MAX)
    port = server.sockets[0].getsockname()[1]
    print(f"listening {port}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with server:
        await stop.wait()
    if log is not None:
        log.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", required=True, type=parse_target, help="HOST:PORT of the server")
    parser.add_argument("--reset-first-requests", type=non_negative, default=0, metavar="N")
    parser.add_argument("--answer-503-first", type=non_negative, default=0, metavar="N")
    parser.add_argument("--retry-after-s", type=non_negative, default=1, metavar="S")
    parser.add_argument("--drop-first-responses", type=non_negative, default=0, metavar="N")
    parser.add_argument("--delay-ms", type=non_negative, default=0, metavar="N")
    parser.add_argument("--delay-first-responses", type=non_negative, default=None, metavar="N")
    parser.add_argument("--outage-ms", type=non_negative, default=0, metavar="MS")
    parser.add_argument("--outage-faults", type=outage_faults, default=outage_faults(DEFAULT_OUTAGE_FAULTS),
                        metavar="LIST")
    parser.add_argument("--log", metavar="FILE", help="append one JSON line per request")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()

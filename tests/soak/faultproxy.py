"""A fault-injecting TCP proxy for the chaos soak (standard library, asyncio).

Each accepted connection draws a *plan* from the proxy's seeded generator (seed, proxy name,
connection number): nothing, or one fault that fires when its moment comes:

  reset_at_accept   the client's connection is reset (RST) before anything is forwarded
  cut_request       after N bytes client→server, both sides are closed (a request cut midway)
  cut_response      after N bytes server→client, both sides are closed (an answer cut midway)
  reset_response    after N bytes server→client, the client is reset (RST)
  delay             every chunk, both ways, waits D ms before it is forwarded
  stall             after N bytes server→client, the stream stops for S seconds, then goes on

A fault is counted (``counts``) when it fires, not when it is drawn. ``calm()`` stops every fault
(new connections get no plan; drawn plans no longer fire), ``storm(False)`` too; ``close()`` stops
listening and cuts every open connection. Bounds: at most ``CONNECTIONS_MAX`` open connections (more
are reset at once), chunks of at most 64 KiB.

Thread safety: a FaultProxy lives on one asyncio loop (ProxyLoop runs one in a thread); its public
methods may be called from any thread.
"""

from __future__ import annotations

import asyncio
import random
import socket
import struct
import threading
from collections import Counter
from dataclasses import dataclass

CHUNK_BYTES = 64 * 1024
CONNECTIONS_MAX = 512


@dataclass(frozen=True)
class FaultRates:
    """Chances that a new connection gets each fault, and the ranges its moment is drawn from."""

    reset_at_accept: float = 0.0
    cut_request: float = 0.0
    cut_response: float = 0.0
    reset_response: float = 0.0
    delay: float = 0.0
    stall: float = 0.0
    bytes_range: tuple[int, int] = (1, 400)  # N: how far into the stream a cut, reset or stall fires
    delay_ms_range: tuple[int, int] = (20, 400)
    stall_s_range: tuple[float, float] = (1.0, 5.0)

    def kinds(self) -> list[tuple[str, float]]:
        return [(k, getattr(self, k)) for k in
                ("reset_at_accept", "cut_request", "cut_response", "reset_response", "delay", "stall")]


@dataclass
class Plan:
    kind: str = "none"
    at_bytes: int = 0
    delay_s: float = 0.0
    stall_s: float = 0.0
    fired: bool = False


def _reset(writer: asyncio.StreamWriter) -> None:
    """Closes with an RST (SO_LINGER 0) instead of a FIN."""
    sock = writer.get_extra_info("socket")
    try:
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    writer.transport.abort()


class FaultProxy:
    def __init__(self, loop: asyncio.AbstractEventLoop, name: str, target_port: int, rates: FaultRates,
                 seed: int) -> None:
        self.name = name
        self.target_port = target_port
        self.rates = rates
        self.port = 0
        self._loop = loop
        self._rng = random.Random(f"{seed}:proxy:{name}")
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()
        self._faults_on = True
        self._server: asyncio.base_events.Server | None = None
        self._open: set[asyncio.StreamWriter] = set()
        self.connections = 0

    # --- control, from any thread ----------------------------------------------------------------
    def counts(self) -> Counter[str]:
        with self._lock:
            return Counter(self._counts)

    def calm(self) -> None:
        with self._lock:
            self._faults_on = False

    def storm(self, on: bool = True) -> None:
        with self._lock:
            self._faults_on = on

    def cut_all(self) -> None:
        """Resets every open connection (e.g. the network between two hosts fails at once)."""
        def cut() -> None:
            for w in list(self._open):
                _reset(w)
        self._loop.call_soon_threadsafe(cut)

    # --- on the loop ------------------------------------------------------------------------------
    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server:
            self._server.close()
        for w in list(self._open):
            _reset(w)

    def _draw(self) -> Plan:
        with self._lock:
            self.connections += 1
            if not self._faults_on:
                return Plan()
            r = self._rng
            x = r.random()
            for kind, p in self.rates.kinds():
                if x < p:
                    lo, hi = self.rates.bytes_range
                    return Plan(kind, at_bytes=r.randint(lo, hi),
                                delay_s=r.randint(*self.rates.delay_ms_range) / 1000.0,
                                stall_s=r.uniform(*self.rates.stall_s_range))
                x -= p
            return Plan()

    def _fire(self, kind: str) -> bool:
        with self._lock:
            if not self._faults_on:
                return False
            self._counts[kind] += 1
            return True

    async def _serve(self, c_reader: asyncio.StreamReader, c_writer: asyncio.StreamWriter) -> None:
        plan = self._draw()
        if len(self._open) >= CONNECTIONS_MAX or (plan.kind == "reset_at_accept" and self._fire(plan.kind)):
            _reset(c_writer)
            return
        try:
            s_reader, s_writer = await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", self.target_port), timeout=5)
        except (OSError, asyncio.TimeoutError):
            _reset(c_writer)  # the target is down: the client sees a refused-like reset
            return
        self._open.update((c_writer, s_writer))
        done = asyncio.Event()
        pumps = [asyncio.ensure_future(self._pump(c_reader, s_writer, c_writer, plan, upstream=True, done=done)),
                 asyncio.ensure_future(self._pump(s_reader, c_writer, c_writer, plan, upstream=False, done=done))]
        await done.wait()
        for p in pumps:
            p.cancel()
        for w in (c_writer, s_writer):
            self._open.discard(w)
            if not w.transport.is_closing():
                w.close()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    client_writer: asyncio.StreamWriter, plan: Plan, *, upstream: bool, done: asyncio.Event) -> None:
        sent = 0
        stalled = False
        try:
            while True:
                chunk = await reader.read(CHUNK_BYTES)
                if not chunk:
                    # Half-close: pass the FIN on and let the other direction finish.
                    if writer.can_write_eof():
                        writer.write_eof()
                    if upstream:
                        return
                    break
                if plan.kind == "delay" and self._delay_fires(plan):
                    await asyncio.sleep(plan.delay_s)
                cut_here = (plan.kind == "cut_request" and upstream) or \
                           (plan.kind in ("cut_response", "reset_response") and not upstream)
                if cut_here and sent + len(chunk) >= plan.at_bytes and self._fire(plan.kind):
                    writer.write(chunk[: max(0, plan.at_bytes - sent)])
                    if plan.kind == "reset_response":
                        _reset(client_writer)
                    break
                if plan.kind == "stall" and not upstream and not stalled and sent + len(chunk) >= plan.at_bytes:
                    stalled = True
                    if self._fire("stall"):
                        await asyncio.sleep(plan.stall_s)
                writer.write(chunk)
                sent += len(chunk)
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError, ConnectionError):
            pass
        done.set()

    def _delay_fires(self, plan: Plan) -> bool:
        """A delay slows every chunk of its connection while faults are on; it counts once."""
        if plan.fired:
            with self._lock:
                return self._faults_on
        plan.fired = self._fire("delay")
        return plan.fired


class ProxyLoop:
    """One asyncio loop in a daemon thread, hosting every FaultProxy of a run."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="proxy-loop", daemon=True)
        self._thread.start()
        self.proxies: list[FaultProxy] = []

    def add(self, name: str, target_port: int, rates: FaultRates, seed: int) -> FaultProxy:
        proxy = FaultProxy(self.loop, name, target_port, rates, seed)
        asyncio.run_coroutine_threadsafe(proxy.start(), self.loop).result(timeout=10)
        self.proxies.append(proxy)
        return proxy

    def counts(self) -> Counter[str]:
        total: Counter[str] = Counter()
        for p in self.proxies:
            kind = "db" if p.name.startswith("db") else "http"
            for k, n in p.counts().items():
                total[f"{kind}_{k}"] += n
        return total

    def close(self) -> None:
        for p in self.proxies:
            asyncio.run_coroutine_threadsafe(p.stop(), self.loop).result(timeout=10)

        async def cancel_the_rest() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        asyncio.run_coroutine_threadsafe(cancel_the_rest(), self.loop).result(timeout=10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)

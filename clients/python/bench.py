#!/usr/bin/env python3
"""The client's overhead per reserve+commit, against raw ``http.client`` on the same server in the
same run.

    python3 clients/python/bench.py [--lifecycles N]    (env TOLLGATE_BIN)

Starts ``tollgate serve`` on a fresh SQLite file (durable as always: each call answered after its
WAL flush), then runs N sequential lifecycles (reserve 1 credit, commit it) with each of: raw
``http.client`` on one kept-alive connection (building and parsing the JSON, nothing else) and the
client (``Client.reserve`` + ``Client.commit``: argument checks, the retry loop, typed results) —
one of each in turn, so that the disk's and the machine's drift falls on both alike.

Prints one JSON line: per lifecycle, the median (and mean) wall time of each in µs and the client's
overhead, and the CPU time of this process (the client side only; the server is another process)
— the CPU figure is the steadier one: the wall time is mostly the server's durable flushes. Checks
its results: every lifecycle committed exactly one credit (the account's ``used``), nothing is left
reserved, and the audit is clean.
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent / "tests"))

from support import ADMIN_KEY, Processes, Server  # noqa: E402
from tollgate_client import Client  # noqa: E402

ACCOUNT = "bench"


class Raw:
    """A reserve+commit with raw http.client on one kept-alive connection: JSON in and out, the
    status checked, nothing else."""

    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        self.headers = {"Authorization": f"Bearer {ADMIN_KEY}", "Content-Type": "application/json"}

    def lifecycle(self, request_id: str) -> None:
        body = json.dumps({"account_id": ACCOUNT, "amount": 1, "request_id": request_id})
        self.conn.request("POST", "/v1/holds", body, self.headers)
        answer = self.conn.getresponse()
        hold = json.loads(answer.read())
        if answer.status != 201:
            raise RuntimeError(f"raw reserve answered {answer.status}: {hold}")
        self.conn.request("POST", f"/v1/holds/{hold['hold_id']}/commit", "{}", self.headers)
        answer = self.conn.getresponse()
        committed = json.loads(answer.read())
        if answer.status != 200 or committed["status"] != "committed":
            raise RuntimeError(f"raw commit answered {answer.status}: {committed}")


class WithClient:
    """The same with the client: argument checks, the retry loop, typed results."""

    def __init__(self, url: str) -> None:
        self.client = Client(url, ADMIN_KEY)

    def lifecycle(self, request_id: str) -> None:
        hold = self.client.reserve(ACCOUNT, 1, request_id=request_id)
        if self.client.commit(hold.hold_id).status != "committed":
            raise RuntimeError("client commit did not commit")


def timed(lifecycle: Callable[[str], None], request_id: str, walls: list[float], cpus: list[float]) -> None:
    """Runs one lifecycle; appends its wall and this process's CPU time (µs)."""
    wall, cpu = time.perf_counter(), time.process_time()
    lifecycle(request_id)
    walls.append((time.perf_counter() - wall) * 1e6)
    cpus.append((time.process_time() - cpu) * 1e6)


def main() -> None:
    parser = argparse.ArgumentParser(description="client vs raw http.client, per reserve+commit")
    parser.add_argument("--lifecycles", type=int, default=2000, help="per implementation")
    args = parser.parse_args()
    if args.lifecycles < 1:
        parser.error("--lifecycles must be at least 1")

    n = args.lifecycles
    warm_up = 20
    walls: dict[str, list[float]] = {"raw": [], "client": []}
    cpus: dict[str, list[float]] = {"raw": [], "client": []}
    processes = Processes()
    try:
        server = Server(processes)
        with Client(server.url, ADMIN_KEY) as admin:
            admin.create_account(ACCOUNT)
            admin.credit(ACCOUNT, 2 * (n + warm_up), "bench-credits")
            raw, with_client = Raw(server.port), WithClient(server.url)
            for i in range(warm_up):  # connections, the server's caches, this interpreter's imports
                raw.lifecycle(f"raw-warm-{i}")
                with_client.lifecycle(f"client-warm-{i}")
            # One of each in turn (which goes first alternates): drift of the disk and the machine
            # falls on both alike.
            for i in range(n):
                pair = [("raw", raw.lifecycle), ("client", with_client.lifecycle)]
                for name, lifecycle in pair if i % 2 == 0 else pair[::-1]:
                    timed(lifecycle, f"{name}-{i}", walls[name], cpus[name])
            raw.conn.close()
            with_client.client.close()
            account = admin.get_account(ACCOUNT)
            if account.used != 2 * (n + warm_up) or account.reserved != 0 or account.available != 0:
                raise RuntimeError(f"expected {2 * (n + warm_up)} used, nothing reserved or left: {account}")
            if admin.audit().violations:
                raise RuntimeError("the audit found violations")
    finally:
        processes.close()

    med = {name: (statistics.median(walls[name]), statistics.median(cpus[name])) for name in walls}
    mean = {name: (statistics.fmean(walls[name]), statistics.fmean(cpus[name])) for name in walls}
    print(json.dumps({
        "bench": "python_client_overhead",
        "lifecycles_each": n,
        "raw_wall_us_median": round(med["raw"][0], 1),
        "client_wall_us_median": round(med["client"][0], 1),
        "client_wall_overhead_us_median": round(med["client"][0] - med["raw"][0], 1),
        "raw_wall_us_mean": round(mean["raw"][0], 1),
        "client_wall_us_mean": round(mean["client"][0], 1),
        "raw_cpu_us_median": round(med["raw"][1], 1),
        "client_cpu_us_median": round(med["client"][1], 1),
        "client_cpu_overhead_us_median": round(med["client"][1] - med["raw"][1], 1),
        "client_cpu_overhead_us_mean": round(mean["client"][1] - mean["raw"][1], 1),
        "checked": "used == every lifecycle, nothing reserved or left, audit clean",
    }), flush=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The client's overhead per reserve+commit, against raw ``http.client`` on the same server in the
same run.

    python3 clients/python/bench.py [--lifecycles N] [--rounds R]    (env TOLLGATE_BIN)

Starts ``tollgate serve`` on a fresh SQLite file (durable as always: each call answered after its
WAL flush), then runs R rounds; each round does N sequential lifecycles (reserve 1 credit, commit it)
with raw ``http.client`` on one kept-alive connection (building and parsing the JSON, nothing else),
then N with the client (``Client.reserve`` + ``Client.commit``: argument checks, request id, typed
results). Alternating the two in rounds spreads the disk's and the machine's drift over both.

Prints one JSON line: per lifecycle, the wall time of each (µs, the mean over all rounds), the
client's wall-time overhead, and the CPU time of this process (the client side only; the server is
another process) — the CPU figure is the steadier one on a shared machine. Checks its results:
every lifecycle committed exactly one credit (the account's ``used``), and the audit is clean.
"""

from __future__ import annotations

import argparse
import http.client
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent / "tests"))

from support import ADMIN_KEY, Processes, Server  # noqa: E402
from tollgate_client import Client  # noqa: E402

ACCOUNT = "bench"


def raw_lifecycles(port: int, count: int, round_index: int) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    headers = {"Authorization": f"Bearer {ADMIN_KEY}", "Content-Type": "application/json"}
    try:
        for i in range(count):
            body = json.dumps({"account_id": ACCOUNT, "amount": 1, "request_id": f"raw-{round_index}-{i}"})
            conn.request("POST", "/v1/holds", body, headers)
            answer = conn.getresponse()
            hold = json.loads(answer.read())
            if answer.status != 201:
                raise RuntimeError(f"raw reserve answered {answer.status}: {hold}")
            conn.request("POST", f"/v1/holds/{hold['hold_id']}/commit", "{}", headers)
            answer = conn.getresponse()
            committed = json.loads(answer.read())
            if answer.status != 200 or committed["status"] != "committed":
                raise RuntimeError(f"raw commit answered {answer.status}: {committed}")
    finally:
        conn.close()


def client_lifecycles(url: str, count: int, round_index: int) -> None:
    with Client(url, ADMIN_KEY) as client:
        for i in range(count):
            hold = client.reserve(ACCOUNT, 1, request_id=f"client-{round_index}-{i}")
            if client.commit(hold.hold_id).status != "committed":
                raise RuntimeError("client commit did not commit")


def measure(run: Callable[..., None], *args: object) -> tuple[float, float]:
    """(wall seconds, this process's CPU seconds) of run(*args)."""
    wall, cpu = time.perf_counter(), time.process_time()
    run(*args)
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description="client vs raw http.client, per reserve+commit")
    parser.add_argument("--lifecycles", type=int, default=500, help="per implementation and round")
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    if args.lifecycles < 1 or args.rounds < 1:
        parser.error("--lifecycles and --rounds must be at least 1")

    processes = Processes()
    try:
        server = Server(processes)
        with Client(server.url, ADMIN_KEY) as admin:
            total = 2 * args.lifecycles * args.rounds
            admin.create_account(ACCOUNT)
            admin.credit(ACCOUNT, total + 100, "bench-credits")
            # Warm-up: connections, the server's caches, this interpreter's imports.
            client_lifecycles(server.url, 20, -1)
            raw_lifecycles(server.port, 20, -1)
            sums = {"raw": [0.0, 0.0], "client": [0.0, 0.0]}
            for r in range(args.rounds):
                for name, wall_cpu in (("raw", measure(raw_lifecycles, server.port, args.lifecycles, r)),
                                       ("client", measure(client_lifecycles, server.url, args.lifecycles, r))):
                    sums[name][0] += wall_cpu[0]
                    sums[name][1] += wall_cpu[1]
            account = admin.get_account(ACCOUNT)
            if account.used != total + 40 or account.reserved != 0:
                raise RuntimeError(f"expected {total + 40} used and 0 reserved, the server has {account}")
            if admin.audit().violations:
                raise RuntimeError("the audit found violations")
    finally:
        processes.close()

    n = args.lifecycles * args.rounds
    per = {name: (wall / n * 1e6, cpu / n * 1e6) for name, (wall, cpu) in sums.items()}
    print(json.dumps({
        "bench": "python_client_overhead",
        "lifecycles_each": n,
        "raw_us_per_lifecycle": round(per["raw"][0], 1),
        "client_us_per_lifecycle": round(per["client"][0], 1),
        "client_overhead_us": round(per["client"][0] - per["raw"][0], 1),
        "client_over_raw_wall": round(per["client"][0] / per["raw"][0], 3),
        "raw_cpu_us_per_lifecycle": round(per["raw"][1], 1),
        "client_cpu_us_per_lifecycle": round(per["client"][1], 1),
        "client_cpu_overhead_us": round(per["client"][1] - per["raw"][1], 1),
        "checked": "used == lifecycles, reserved 0, audit clean",
    }), flush=True)


if __name__ == "__main__":
    main()

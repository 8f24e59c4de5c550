#!/usr/bin/env python3
"""The chaos soak (issue 12): run by scripts/soak, whose header says how to call it.

One run per backend: PostgreSQL — `--instances` `tollgate serve` on one throw-away server (scripts/pg),
each behind a fault proxy, and every instance's database connections through another fault proxy —
or SQLite — one instance on a file, behind a fault proxy. Worker threads call every kind of
operation (workload.py) and record what they saw (history.py) while the nemesis (cluster.py) kills,
pauses and restarts processes. Then the faults stop, every instance is made healthy, the run waits
for every job and hold to end, reads the whole state, and the checker (checker.py) judges it.

Everything random comes from --seed. Output: the checker's report per backend, then as the last
line one JSON object (operations, unknown, faults, anomalies, seed, and the same per backend).
Exit status 1 on any anomaly, 2 on a set-up failure.
"""

from __future__ import annotations

import argparse
import dataclasses
import http.client
import json
import os
import random
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from typing import Any, Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import checker  # noqa: E402
from cluster import REPO, Instance, Nemesis, Postgres, Provider, free_port, http_status  # noqa: E402
from faultproxy import FaultRates, ProxyLoop  # noqa: E402
from history import Attempt, History  # noqa: E402
from workload import Settings, Worker, request  # noqa: E402

ADMIN_KEY = "soak-admin-key-0123456789abcdef"
HOLD_TTL_MS = 3000           # the server's default hold TTL
HOLD_TTL_RANGE_MS = (1000, 4000)
LOCK_TTL_RANGE_MS = (800, 2500)
PAUSE_S = (4.5, 7.0)         # SIGSTOP longer than every hold TTL and lock lease above
RATELIMIT = {"limit": 3, "period_ms": 3000}
ACCOUNTS = 6
SETTLE_S_MAX = 180           # the end: how long every job and hold may take to end

HTTP_RATES = FaultRates(reset_at_accept=0.02, cut_request=0.02, cut_response=0.03, reset_response=0.02,
                        delay=0.04, stall=0.02, bytes_range=(1, 500), delay_ms_range=(20, 600),
                        stall_s_range=(1.0, 5.0))
DB_RATES = FaultRates(cut_request=0.1, cut_response=0.1, reset_response=0.05, delay=0.1, stall=0.08,
                      bytes_range=(200, 60_000), delay_ms_range=(1, 40), stall_s_range=(0.5, 3.0))
OPENING_CREDITS = 60


def log(msg: str) -> None:
    print(f"[soak {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def write_config(path: str, port: int, database: str, provider_port: int | None) -> None:
    lines = [f'listen = "127.0.0.1:{port}"', f'database = "{database}"', f'admin_key = "{ADMIN_KEY}"',
             f"hold_ttl_ms = {HOLD_TTL_MS}", "hold_ttl_max_ms = 20000", 'late_commit = "charge"',
             "reaper_interval_ms = 200", "database_timeout_ms = 2000", "auth_failures_limit = 0"]
    if provider_port:
        lines += ["", "[providers.imagegen]", f'url = "http://127.0.0.1:{provider_port}/generate"',
                  f'status_url = "http://127.0.0.1:{provider_port}/status/{{id}}"', "timeout_ms = 1500",
                  "expected_duration_ms = 400"]
    lines += ["", "[ratelimits.soak]", f"limit = {RATELIMIT['limit']}", f"period_ms = {RATELIMIT['period_ms']}",
              'store = "shared"']
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def admin(port: int, method: str, path: str, body: dict[str, Any] | None = None, tries: int = 20) -> tuple[int, Any]:
    """A call made while nothing is being hurt: retried on no answer or 5xx, bounded."""
    status, parsed = 0, None
    for _ in range(tries):
        status, parsed, _, _ = request(("direct", port), ADMIN_KEY, method, path, body, 15.0)
        if status and status < 500:
            return status, parsed
        time.sleep(0.5)
    raise RuntimeError(f"{method} {path}: no answer after {tries} tries (last status {status})")


def wait_until(what: str, done: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if done():
            return True
        time.sleep(0.2)
    log(f"gave up waiting for {what} after {timeout_s:.0f} s")
    return False


def read_paged(port: int, path: str, items: str, cursor_of: Callable[[Any], str],
               pages_max: int = 10_000) -> list[Any]:
    out: list[Any] = []
    cursor = ""
    for _ in range(pages_max):
        sep = "&" if "?" in path else "?"
        _, page = admin(port, "GET", f"{path}{sep}limit=1000{cursor}")
        out += page[items]
        if not page.get("has_more"):
            return out
        cursor = "&starting_after=" + cursor_of(page[items][-1])
    raise RuntimeError(f"{path}: more than {pages_max} pages")


def read_events(port: int, account: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    after = 0
    for _ in range(100_000):
        _, page = admin(port, "GET", f"/v1/accounts/{account}/events?after={after}&limit=1000")
        if not page["events"]:
            return out
        out += page["events"]
        after = page["next_after"]
    raise RuntimeError("event log too long")


def run_backend(backend: str, args: argparse.Namespace, work: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    seed = args.seed
    binary = args.bin
    rng = random.Random(f"{seed}:{backend}")
    loop = ProxyLoop()
    pg: Postgres | None = None
    provider = Provider(binary, rng.randrange(2**31), os.path.join(work, f"{backend}-provider.log"))
    instances: list[Instance] = []
    history = History(backend)
    try:
        provider.start()
        n = args.instances if backend == "postgres" else 1
        db_proxy = None
        if backend == "postgres":
            pg = Postgres(os.path.join(work, "pgroot"))
            pg.start()
            db_proxy = loop.add("db", pg.port, DB_RATES, seed)
            database = f"postgresql://tollgate@127.0.0.1:{db_proxy.port}/tollgate?connect_timeout=3"
        else:
            database = f"sqlite:{os.path.join(work, 'soak.db')}"
        for i in range(n):
            port = free_port()
            cfg = os.path.join(work, f"{backend}-i{i}.toml")
            write_config(cfg, port, database, provider.port)
            instances.append(Instance(f"i{i}", binary, cfg, os.path.join(work, f"{backend}-i{i}.log"), port))
        for inst in instances:
            inst.start()
            if not wait_until(f"{inst.name} ready", inst.ready, 60):
                raise RuntimeError(f"{inst.name} did not become ready (log: {inst.log_path})")
        fronts = [loop.add(f"http-{inst.name}", inst.port, HTTP_RATES, seed) for inst in instances]
        log(f"{backend}: {n} instance(s) ready, proxies on {[p.port for p in fronts]}"
            + (f", PostgreSQL :{pg.port} behind :{db_proxy.port}" if pg and db_proxy else ""))

        accounts = [f"acct-{i}" for i in range(ACCOUNTS)]
        p0 = instances[0].port
        for a in accounts:
            admin(p0, "POST", "/v1/accounts", {"account_id": a})
        # The opening credits are operations like the others (made calmly, so they are ok).
        settings = Settings(endpoints=[(p.name, p.port) for p in fronts], admin_key=ADMIN_KEY, accounts=accounts,
                            lock_keys=["lk-0", "lk-1"], ratelimit_keys=["rl-0", "rl-1"], provider="imagegen",
                            hold_ttl_ms_range=HOLD_TTL_RANGE_MS, lock_ttl_ms_range=LOCK_TTL_RANGE_MS)
        for a in accounts:
            op = history.new_op("credit", "setup", {"account_id": a, "amount": OPENING_CREDITS, "reference": f"open-{a}"})
            status, body = admin(p0, "POST", f"/v1/accounts/{a}/credits",
                                 {"amount": OPENING_CREDITS, "reference": f"open-{a}"})
            op.attempts.append(Attempt("direct", status, "", 0, 0))
            op.result = body
            op.classify()
            history.record(op)

        stop = threading.Event()
        workers = [Worker(i, history, settings, seed, stop) for i in range(args.workers)]
        threads = [threading.Thread(target=w.run, name=f"w{i}", daemon=True) for i, w in enumerate(workers)]
        nemesis = Nemesis(seed, instances, pg, provider, db_proxy.cut_all if db_proxy else None,
                          interval_s=(1.0, 4.0), pause_s=PAUSE_S, log=log)
        for t in threads:
            t.start()
        nemesis.thread.start()
        seconds = args.seconds
        t_end = time.monotonic() + seconds
        while time.monotonic() < t_end:
            time.sleep(min(10.0, max(0.0, t_end - time.monotonic())))
            ops = history.operations()
            log(f"{backend}: {len(ops)} operations, faults {dict(nemesis.counts)}")

        # --- the end: faults stop, clients stop, every instance healthy again --------------------
        log(f"{backend}: stopping the faults and the clients")
        nemesis.stop.set()
        nemesis.thread.join(timeout=120)
        for p in loop.proxies:
            p.calm()
        stop.set()
        for t in threads:
            t.join(timeout=120)
        provider.resume()
        if provider.proc is None or provider.proc.poll() is not None:
            provider.start()
        for inst in instances:
            inst.resume()
            if inst.proc is not None:
                inst.check_exit()
            if inst.proc is None:
                inst.start()
        healthy = all(wait_until(f"{i.name} ready", i.ready, 90) for i in instances)
        faults = Counter(nemesis.counts) + loop.counts()
        log(f"{backend}: every instance healthy again: {healthy}; waiting for jobs and holds to end")

        # Every job must end, then every hold (past its TTL the reaper of any instance ends it).
        job_ids = [o.args["client_request_id"] for o in history.operations() if o.kind == "job_submit"]
        deadline = time.monotonic() + SETTLE_S_MAX
        jobs: dict[str, Any] = {}
        for jid in job_ids:
            for _ in range(100):
                status, job = admin(p0, "GET", f"/v1/jobs/{jid}?wait_ms=5000")
                jobs[jid] = job if status == 200 else None
                if status != 200 or job["status"] in ("completed", "failed", "cancelled") or time.monotonic() > deadline:
                    break

        def no_active_holds() -> bool:
            _, page = admin(p0, "GET", "/v1/accounts?limit=1000")
            return all(a["active_holds"] == 0 for a in page["accounts"])

        settled = wait_until("every hold to end", no_active_holds, max(10.0, deadline - time.monotonic()))
        time.sleep(0.5)
        state: dict[str, Any] = {"backend": backend, "seed": seed, "settled": settled and healthy,
                                 "config": {"ratelimit": RATELIMIT, "hold_ttl_ms": HOLD_TTL_MS},
                                 "faults": dict(faults), "unexpected_exits": [],
                                 "nemesis_errors": nemesis.errors}
        for inst in instances:
            state["unexpected_exits"] += inst.unexpected_exits
        rows = read_paged(p0, "/v1/accounts", "accounts", lambda a: a["account_id"])
        state["accounts"] = {a["account_id"]: a for a in rows}
        state["events"] = {a: read_events(p0, a) for a in state["accounts"]}
        state["holds"] = {a: read_paged(p0, f"/v1/holds?account_id={a}", "holds", lambda h: h["hold_id"])
                          for a in state["accounts"]}
        state["jobs"] = {}
        for jid in job_ids:
            status, job = admin(p0, "GET", f"/v1/jobs/{jid}")
            state["jobs"][jid] = job if status == 200 else None
        state["locks"] = {}
        for key in settings.lock_keys:
            status, lock = admin(p0, "GET", f"/v1/locks/{key}")
            state["locks"][key] = lock if status == 200 else None
        _, state["audit"] = admin(p0, "GET", "/v1/audit")
        records = [dataclasses.asdict(o) for o in history.operations()]
        with open(os.path.join(work, f"{backend}-history.jsonl"), "w", encoding="utf-8") as f:
            for record in records:
                f.write(json.dumps(record, separators=(",", ":")) + "\n")
        with open(os.path.join(work, f"{backend}-state.json"), "w", encoding="utf-8") as f:
            json.dump(state, f)
        return records, state
    finally:
        for inst in instances:
            inst.terminate()
        provider.terminate()
        loop.close()
        if pg is not None:
            pg.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description="tollgate chaos soak (see scripts/soak)")
    ap.add_argument("--seconds", type=float, required=True, help="how long the faults and clients run, per backend")
    ap.add_argument("--seed", type=int, default=None, help="every random choice comes from it (default: drawn, printed)")
    ap.add_argument("--backend", choices=("postgres", "sqlite", "both"), default="both")
    ap.add_argument("--instances", type=int, default=3, help="tollgate serve instances on PostgreSQL (1-8)")
    ap.add_argument("--workers", type=int, default=8, help="client threads (1-64)")
    ap.add_argument("--keep", action="store_true", help="keep the work folder (logs, history, state) even when clean")
    ap.add_argument("--bin", default=os.environ.get("TOLLGATE_BIN", os.path.join(REPO, "build", "tollgate")))
    args = ap.parse_args()
    if not (1 <= args.instances <= 8 and 1 <= args.workers <= 64 and 1 <= args.seconds <= 24 * 3600):
        ap.error("--instances 1-8, --workers 1-64, --seconds 1-86400")
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(2**31)
    if not os.access(args.bin, os.X_OK):
        print(f"soak: no tollgate binary at {args.bin} (build it, or set TOLLGATE_BIN)", file=sys.stderr)
        return 2
    work = tempfile.mkdtemp(prefix="tollgate-soak.", dir="/tmp")
    os.chmod(work, 0o755)
    log(f"seed {args.seed} (rerun: scripts/soak --seconds {args.seconds:g} --seed {args.seed} "
        f"--backend {args.backend} --instances {args.instances} --workers {args.workers}); work folder {work}")
    backends = ["postgres", "sqlite"] if args.backend == "both" else [args.backend]
    summaries: list[dict[str, Any]] = []
    anomalies = 0
    for backend in backends:
        try:
            ops, state = run_backend(backend, args, work)
        except Exception as e:  # noqa: BLE001 — a set-up failure is reported with the work folder
            log(f"{backend}: the run failed: {e!r} (logs in {work})")
            return 2
        report = checker.check(ops, state)
        text, summary = checker.summarize(ops, state, report)
        print(text, flush=True)
        summaries.append(summary)
        anomalies += len(report.anomalies)
    total = {"seed": args.seed, "seconds": args.seconds, "backends": backends,
             "operations": sum(s["operations"] for s in summaries), "unknown": sum(s["unknown"] for s in summaries),
             "faults": sum(s["faults"] for s in summaries), "anomalies": anomalies,
             "per_backend": summaries}
    if anomalies == 0 and not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    else:
        log(f"history, state and logs kept in {work}")
    print(json.dumps(total, sort_keys=True), flush=True)
    return 1 if anomalies else 0


if __name__ == "__main__":
    sys.exit(main())

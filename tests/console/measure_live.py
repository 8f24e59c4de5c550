"""What one open console costs the server, idle and under a steady write load (docs/internals/benchmarks.md, Console):
the server's CPU (utime + stime of its process, /proc/PID/stat) and the requests the console causes
(the server's tollgate_http_requests_total for GET routes, less this script's own /metrics reads),
each over --seconds, for no console, the overview and an account page.

    TOLLGATE_BIN=build/tollgate /usr/bin/python3 tests/console/measure_live.py [--seconds 60] [--writes-per-s 20]
"""
import argparse
import os
import threading
import time

import support

BINARY = os.environ.get("TOLLGATE_BIN", os.path.join(os.path.dirname(__file__), "../../build/tollgate"))
ACCOUNTS = 50
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime (fields 14 and 15 of stat)


def get_requests(api):
    """GET requests answered so far, by route (the writer only POSTs)."""
    out = {}
    for k, v in api.metrics().items():
        if k.startswith('tollgate_http_requests_total{route="GET '):
            route = k.split('route="GET ', 1)[1].split('"', 1)[0]
            out[route] = out.get(route, 0) + v
    return out


class Writer(threading.Thread):
    """A steady write load: `per_s` credits a second, round-robin over the accounts (one in
    ACCOUNTS lands on the account the console shows)."""

    def __init__(self, url, per_s):
        super().__init__(daemon=True)
        self.api, self.per_s, self.stop, self.done = support.Api(url), per_s, threading.Event(), 0

    def run(self):
        start = time.monotonic()
        while not self.stop.is_set():
            i = self.done
            self.api.ok("POST", f"/v1/accounts/acct-{i % ACCOUNTS:03d}/credits", {"amount": 1, "reference": f"load-{time.time_ns()}-{i}"})
            self.done += 1
            wait = start + self.done / self.per_s - time.monotonic()
            if wait > 0:
                self.stop.wait(wait)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--writes-per-s", type=float, default=20)
    args = ap.parse_args()
    server = support.Server(BINARY, env={"TOLLGATE_HOLD_TTL_MS": "3600000"})
    driver = support.chrome()
    try:
        api = support.Api(server.url)
        for i in range(ACCOUNTS):
            api.account(f"acct-{i:03d}", 1000)
        for i in range(10):
            api.hold(f"acct-{i:03d}", 5, f"seed-hold-{i}")
        driver.get(f"{server.url}/console")
        driver.execute_script("sessionStorage.setItem('tollgate.key', arguments[0])", support.ADMIN_KEY)
        for load in (False, True):
            writer = None
            if load:
                writer = Writer(server.url, args.writes_per_s)
                writer.start()
            for name, target in (("no console", "about:blank"), ("overview", f"{server.url}/console#/"),
                                 ("account page", f"{server.url}/console#/account/acct-000")):
                driver.get("about:blank")
                driver.get(target)
                time.sleep(3)
                r0, c0, w0 = get_requests(api), cpu_seconds(server.proc.pid), writer.done if writer else 0
                time.sleep(args.seconds)
                r1, c1, w1 = get_requests(api), cpu_seconds(server.proc.pid), writer.done if writer else 0
                by_route = {k: r1.get(k, 0) - r0.get(k, 0) for k in r1}
                by_route["/metrics"] = by_route.get("/metrics", 0) - 1  # this script's second read
                total = sum(by_route.values())
                routes = ", ".join(f"{k} {v / args.seconds:.2f}" for k, v in sorted(by_route.items()) if v > 0)
                print(f"{'write load' if load else 'idle':10s} {name:12s}: {total / args.seconds:5.2f} GET requests/s "
                      f"[{routes}]; server CPU {1000 * (c1 - c0) / args.seconds:5.1f} ms/s"
                      + (f"; writes {(w1 - w0) / args.seconds:.1f}/s" if load else ""), flush=True)
            if writer:
                writer.stop.set()
                writer.join()
    finally:
        driver.quit()
        server.stop()


if __name__ == "__main__":
    main()

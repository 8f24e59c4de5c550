"""The console's figures (docs/internals/benchmarks.md, Console): page weight over the wire on a first load, time to first
render against a server with 10,000 accounts and 1,000 active holds, and what one open console costs
the server (requests/s and CPU seconds/s, from the server's own /metrics).

    /usr/bin/python3 tests/console/measure.py [--accounts 10000] [--holds 1000] [--seconds 30]
"""
import argparse
import json
import os
import threading
import time

import support

BINARY = os.environ.get("TOLLGATE_BIN", os.path.join(os.path.dirname(__file__), "../../build/tollgate"))

# Injected before the page's own scripts (the DevTools protocol is not subject to the page's CSP):
# records when the overview first shows its figures and its accounts table.
PROBE = """
window.__rendered = null;
new MutationObserver((_, obs) => {
  const fig = document.getElementById('fig-accounts');
  const rows = document.querySelectorAll('#accounts-body tr').length;
  if (fig && fig.textContent !== '–' && rows > 0) { window.__rendered = performance.now(); obs.disconnect(); }
}).observe(document, {subtree: true, childList: true, characterData: true});
"""


def seed(url, accounts, holds, threads=4):
    def work(part):
        api = support.Api(url)
        for i in range(part, accounts, threads):
            aid = f"acct-{i:05d}"
            api.ok("POST", "/v1/accounts", {"account_id": aid})
            if i < holds:
                api.ok("POST", f"/v1/accounts/{aid}/credits", {"amount": 1000, "reference": f"{aid}-buy"})
                api.hold(aid, 10, f"{aid}-h", ttl_ms=3_600_000)
        api.close()
    ts = [threading.Thread(target=work, args=(p,)) for p in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def wire_bytes(driver):
    """Bytes over the wire (encodedDataLength: headers and body) per URL, from the DevTools log."""
    urls, out = {}, {}
    for entry in driver.get_log("performance"):
        m = json.loads(entry["message"])["message"]
        if m["method"] == "Network.requestWillBeSent":
            urls[m["params"]["requestId"]] = m["params"]["request"]["url"]
        elif m["method"] == "Network.loadingFinished":
            u = urls.get(m["params"]["requestId"], "?")
            out[u] = out.get(u, 0) + m["params"]["encodedDataLength"]
    return out


def counters(api):
    m = api.metrics()
    requests = sum(v for k, v in m.items() if k.startswith("tollgate_http_requests_total"))
    return requests, m.get("process_cpu_seconds_total", 0.0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--accounts", type=int, default=10_000)
    ap.add_argument("--holds", type=int, default=1_000)
    ap.add_argument("--seconds", type=int, default=30)
    args = ap.parse_args()
    server = support.Server(BINARY, env={"TOLLGATE_HOLD_TTL_MS": "3600000"})
    try:
        t0 = time.time()
        seed(server.url, args.accounts, args.holds)
        api = support.Api(server.url)
        m = api.metrics()
        print(f"seeded in {time.time() - t0:.1f} s: tollgate_accounts={m['tollgate_accounts']:.0f} "
              f"tollgate_active_holds={m['tollgate_active_holds']:.0f}")

        driver = support.chrome()
        try:
            driver.execute_cdp_cmd("Network.enable", {})
            driver.execute_cdp_cmd("Network.setCacheDisabled", {"cacheDisabled": True})
            # 1. First load, signed out (cold: no cache): the page and its files.
            driver.get(f"{server.url}/console")
            time.sleep(1)
            nav = driver.execute_script(
                "const n = performance.getEntriesByType('navigation')[0];"
                "const p = performance.getEntriesByName('first-contentful-paint')[0];"
                "return {fcp: p ? p.startTime : null, load: n.loadEventEnd};")
            files = wire_bytes(driver)
            assets = {u: b for u, b in files.items() if "/console" in u}
            print(f"first load (signed out, no cache): {len(assets)} requests, {sum(assets.values())} bytes over the wire "
                  f"(headers included); first contentful paint {nav['fcp']:.0f} ms, load event {nav['load']:.0f} ms")
            for u, b in sorted(assets.items()):
                print(f"    {b:7d}  {u.replace(server.url, '')}")
            # 2. Signed in (the key in this tab's sessionStorage), a new load of the overview: time
            # until its figures and first accounts page are on screen.
            driver.execute_script("sessionStorage.setItem('tollgate.key', arguments[0])", support.ADMIN_KEY)
            driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": PROBE})
            renders = []
            for _ in range(5):
                driver.get("about:blank")  # a new document each time (a change of the hash alone is not a load)
                driver.get_log("performance")
                driver.get(f"{server.url}/console#/")
                deadline = time.time() + 30
                while time.time() < deadline and driver.execute_script("return window.__rendered") is None:
                    time.sleep(0.05)
                renders.append(driver.execute_script("return window.__rendered"))
                total = sum(wire_bytes(driver).values())
            renders.sort()
            print(f"time to first render of the overview with data ({args.accounts} accounts, {args.holds} active holds),"
                  f" 5 loads without cache: median {renders[2]:.0f} ms (min {renders[0]:.0f}, max {renders[4]:.0f});"
                  f" bytes over the wire for that load, API answers included: {total}")
            driver.execute_cdp_cmd("Network.setCacheDisabled", {"cacheDisabled": False})
            # 3. The cost of one open console: the server's own counters over --seconds.
            for name, hash_ in (("overview", "#/"), ("account page", "#/account/acct-00000")):
                driver.get("about:blank")
                driver.get(f"{server.url}/console{hash_}")
                time.sleep(3)
                r0, c0 = counters(api)
                time.sleep(args.seconds)
                r1, c1 = counters(api)
                rate = (r1 - r0 - 1) / args.seconds  # less this script's second /metrics read
                print(f"one open console on the {name}: {rate:.2f} requests/s to the server, "
                      f"{1000 * (c1 - c0) / args.seconds:.1f} ms of server CPU per second (process_cpu_seconds_total)")
            driver.get("about:blank")
            time.sleep(2)
            r0, c0 = counters(api)
            time.sleep(args.seconds)
            r1, c1 = counters(api)
            print(f"no console (baseline): {(r1 - r0 - 1) / args.seconds:.2f} requests/s, "
                  f"{1000 * (c1 - c0) / args.seconds:.1f} ms of server CPU per second")
        finally:
            driver.quit()
        api.close()
    finally:
        server.stop()


if __name__ == "__main__":
    main()

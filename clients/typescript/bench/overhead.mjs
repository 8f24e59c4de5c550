// The client's overhead per reserve+commit lifecycle against raw fetch, on the same server in the
// same run (issue 14's figure). One caller, one lifecycle after another (each is two durable
// writes of the server: its latency dominates); rounds alternate raw fetch and the client so that
// both see the same disk and load. Each lifecycle is checked (201 then 200 committed), and at the
// end the server's account (used == every lifecycle, nothing reserved) and its audit (clean).
//
//   node bench/overhead.mjs [--lifecycles N] [--rounds R]      (after tsc; TOLLGATE_BIN as the tests)
//
// Prints a line per round on stderr and, as the only line on stdout, one JSON object: per lifecycle,
// the median over rounds of the wall time (µs) and of this process's CPU time (µs, user + system)
// for each, and the client's overhead (client − raw).
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";

import { TollgateClient } from "../dist/index.js";
import { ADMIN_KEY, startServer } from "../test/support/processes.mjs";

const { values } = parseArgs({
  options: { lifecycles: { type: "string", default: "1000" }, rounds: { type: "string", default: "5" } },
});
const LIFECYCLES = Number(values.lifecycles);
const ROUNDS = Number(values.rounds);
if (!(LIFECYCLES >= 1 && ROUNDS >= 1)) throw new Error("--lifecycles and --rounds must be at least 1");
const WARMUP = Math.min(100, LIFECYCLES);

const ACCOUNT = "bench";
const server = await startServer();
try {
  const headers = { Authorization: `Bearer ${ADMIN_KEY}`, "Content-Type": "application/json", Accept: "application/json" };
  const client = new TollgateClient({ baseUrl: server.url, key: ADMIN_KEY });
  const lifecyclesInAll = (WARMUP + LIFECYCLES * ROUNDS) * 2; // raw and client, each using 1 credit
  await client.createAccount(ACCOUNT);
  await client.credit(ACCOUNT, lifecyclesInAll, "bench-credits");

  async function raw(id) {
    const reserved = await fetch(`${server.url}/v1/holds`, {
      method: "POST",
      headers,
      body: JSON.stringify({ account_id: ACCOUNT, amount: 1, request_id: id }),
    });
    const hold = await reserved.json();
    if (reserved.status !== 201) throw new Error(`raw reserve: ${reserved.status} ${JSON.stringify(hold)}`);
    const committed = await fetch(`${server.url}/v1/holds/${encodeURIComponent(hold.hold_id)}/commit`, {
      method: "POST",
      headers,
      body: "{}",
    });
    const done = await committed.json();
    if (committed.status !== 200 || done.status !== "committed") throw new Error(`raw commit: ${JSON.stringify(done)}`);
  }

  async function viaClient(id) {
    const hold = await client.reserve(ACCOUNT, 1, { requestId: id });
    const done = await client.commit(hold.hold_id);
    if (done.status !== "committed") throw new Error(`client commit: ${JSON.stringify(done)}`);
  }

  async function measure(lifecycle, name, count) {
    const cpu = process.cpuUsage();
    const started = performance.now();
    for (let i = 0; i < count; ++i) await lifecycle(`${name}-${i}`);
    const wallUs = ((performance.now() - started) * 1000) / count;
    const used = process.cpuUsage(cpu);
    return { wallUs, cpuUs: (used.user + used.system) / count };
  }

  await measure(raw, "warm-raw", WARMUP);
  await measure(viaClient, "warm-client", WARMUP);
  const rounds = { raw: [], client: [] };
  for (let round = 0; round < ROUNDS; ++round) {
    for (const [name, lifecycle] of [["raw", raw], ["client", viaClient]]) {
      const m = await measure(lifecycle, `${name}-${round}`, LIFECYCLES);
      rounds[name].push(m);
      console.error(`round ${round + 1} ${name}: ${m.wallUs.toFixed(0)} µs wall, ${m.cpuUs.toFixed(0)} µs CPU per lifecycle`);
    }
  }

  const account = await client.getAccount(ACCOUNT);
  if (account.used !== lifecyclesInAll || account.reserved !== 0 || account.available !== 0) {
    throw new Error(`the server disagrees: ${JSON.stringify(account)}`);
  }
  const audit = await client.audit({ accountId: ACCOUNT });
  if (audit.violations.length !== 0) throw new Error(`audit: ${JSON.stringify(audit)}`);

  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const figure = (name, key) => Math.round(median(rounds[name].map((m) => m[key])));
  const result = {
    bench: "typescript_client_overhead",
    node: process.version,
    lifecycles_per_round: LIFECYCLES,
    rounds: ROUNDS,
    raw_fetch_us_per_lifecycle: figure("raw", "wallUs"),
    client_us_per_lifecycle: figure("client", "wallUs"),
    overhead_us_per_lifecycle: figure("client", "wallUs") - figure("raw", "wallUs"),
    raw_fetch_cpu_us_per_lifecycle: figure("raw", "cpuUs"),
    client_cpu_us_per_lifecycle: figure("client", "cpuUs"),
    overhead_cpu_us_per_lifecycle: figure("client", "cpuUs") - figure("raw", "cpuUs"),
    checked: { used: account.used, reserved: account.reserved, audit_violations: 0 },
  };
  console.log(JSON.stringify(result));
} finally {
  await server.stop();
}

// The retry policy against a real server, through clients/testing/lossy_proxy.py: the scenarios
// S1–S7, S11 and S12–S14 of clients/testing/scenarios.md. Each scenario has its own account and its own
// proxy; what the server did is read from the server (holds, balances, events), what was sent from
// the proxy's log.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { performance } from "node:perf_hooks";

import { DEFAULT_RETRY_POLICY, ArgumentError, ProblemError, TollgateClient, TransportError } from "../dist/index.js";
import { adminClient, balances, holdsOf, recorder, seedAccount } from "./support/fixture.mjs";
import { ADMIN_KEY, startProxy, startServer, unusedPort } from "./support/processes.mjs";

describe("retry policy through a lossy proxy (scenarios.md)", () => {
  let server;
  let admin; // straight to the server: set-up and checks
  const proxies = [];

  before(async () => {
    server = await startServer();
    admin = adminClient(server.url);
  });
  after(async () => {
    await Promise.all(proxies.map((p) => p.stop()));
    await server?.stop();
  });

  async function proxy(...faults) {
    const p = await startProxy(server.port, faults);
    proxies.push(p);
    return p;
  }

  // A scenario's start: its account credited 10, a proxy with `faults`, a client through it.
  async function scenario(accountId, faults, options = {}) {
    await seedAccount(admin, accountId);
    const p = await proxy(...faults);
    const seen = recorder();
    return { p, seen, client: adminClient(p.url, { ...seen.hooks, ...options }) };
  }

  // What reached the proxy: one request per fault listed, every one the same bytes.
  function assertSent(p, faults) {
    const sent = p.requests();
    assert.deepEqual(sent.map((r) => r.fault), faults);
    assert.equal(new Set(sent.map((r) => r.body)).size, 1, "every attempt sends the same bytes");
    return sent;
  }

  // What the server holds for the account: how many holds, and its balances.
  async function assertServer(accountId, holds, expected) {
    assert.equal((await holdsOf(admin, accountId)).length, holds);
    assert.deepEqual(await balances(admin, accountId), expected);
  }

  test("S1 lost answer: reserve resent with the same id, reserved once", async () => {
    const { p, seen, client } = await scenario("s1", ["--drop-first-responses", "1"]);

    const hold = await client.reserve("s1", 3); // no request_id: the client makes one, once

    assert.equal(seen.answers.at(-1).attempts, 2);
    assert.equal(seen.answers.at(-1).status, 200, "the second attempt found the first one's hold");
    assert.deepEqual(seen.retries.map((r) => r.reason), ["connection_lost"]);
    const sent = assertSent(p, ["drop", "none"]);
    assert.equal(JSON.parse(sent[0].body).request_id, hold.request_id);
    assert.equal((await holdsOf(admin, "s1"))[0].hold_id, hold.hold_id);
    await assertServer("s1", 1, { available: 7, reserved: 3, used: 0 });
  });

  test("S1 lost answer: a refund resent with the same id, refunded once", async () => {
    const { p, seen, client } = await scenario("s1-refund", ["--drop-first-responses", "1"]);
    const hold = await admin.commit((await admin.reserve("s1-refund", 5)).hold_id);

    const refunded = await client.refundHold(hold.hold_id, { amount: 2, reason: "lost answer" }); // the client makes the id, once

    assert.deepEqual(seen.retries.map((r) => r.reason), ["connection_lost"]);
    assert.deepEqual([seen.answers.at(-1).status, seen.answers.at(-1).attempts], [200, 2]);
    const sent = assertSent(p, ["drop", "none"]);
    const requestId = JSON.parse(sent[0].body).request_id;
    assert.match(requestId, /^client-[0-9a-f]{16}$/);
    assert.equal(refunded.refunded_amount, 2);
    const refunds = (await admin.events("s1-refund")).events.filter((e) => e.type === "refunded");
    assert.deepEqual(refunds.map((e) => [e.amount, e.reference]), [[2, requestId]]);
    await assertServer("s1-refund", 1, { available: 7, reserved: 0, used: 3 });
  });

  test("S1 lost answer: a reserve by feature resent with the same id, reserved once at its price", async () => {
    await admin.setPrice("s1.image", 2);
    const { p, seen, client } = await scenario("s1-feature", ["--drop-first-responses", "1"]);

    const hold = await client.reserve("s1-feature", { feature: "s1.image", quantity: 2 });

    assert.deepEqual([seen.answers.at(-1).status, seen.answers.at(-1).attempts], [200, 2]);
    assertSent(p, ["drop", "none"]);
    assert.deepEqual([hold.amount, hold.quantity, hold.unit_price], [4, 2, 2]);
    await assertServer("s1-feature", 1, { available: 6, reserved: 4, used: 0 });
  });

  test("S1 lost answer: setPrice resent, one version", async () => {
    const { p, seen, client } = await scenario("s1-price", ["--drop-first-responses", "1"]);

    const price = await client.setPrice("s1.price", 7);

    assert.deepEqual([seen.answers.at(-1).status, seen.answers.at(-1).attempts], [200, 2], "the resend found the same price");
    const sent = assertSent(p, ["drop", "none"]);
    assert.deepEqual(sent.map((r) => r.method), ["PUT", "PUT"]);
    assert.deepEqual([price.credits_per_unit, price.version], [7, 1]);
    assert.deepEqual((await admin.listPriceVersions("s1.price")).versions.map((v) => v.version), [1]);
  });

  test("S2 reset before the server saw it: resent, reserved once", async () => {
    const { p, seen, client } = await scenario("s2", ["--reset-first-requests", "1"]);

    const hold = await client.reserve("s2", 3, { requestId: "r-reset" });

    assert.equal(hold.request_id, "r-reset");
    assert.equal(seen.answers.at(-1).status, 201, "the server saw one request");
    assert.equal(seen.answers.at(-1).attempts, 2);
    assertSent(p, ["reset", "none"]);
    await assertServer("s2", 1, { available: 7, reserved: 3, used: 0 });
  });

  test("S3 time-out: resent with the same id", async () => {
    // scenarios.md delays 1.5 s; 5 s here, so that a test process starved for a second on a busy
    // machine still sees its 300 ms time-out fire before the late answer arrives.
    const { p, seen, client } = await scenario("s3", ["--delay-ms", "5000", "--delay-first-responses", "1"], { timeoutMs: 300 });

    const hold = await client.reserve("s3", 2, { requestId: "r-slow" });

    assert.deepEqual(seen.retries.map((r) => r.reason), ["timeout"]);
    assert.equal(seen.answers.at(-1).attempts, 2);
    assert.equal(seen.answers.at(-1).status, 200, "the first attempt had reserved");
    const found = await admin.listHolds({ requestId: "r-slow" });
    assert.equal(found.holds.length, 1);
    assert.equal(found.holds[0].hold_id, hold.hold_id);
    assertSent(p, ["delay", "none"]);
    await assertServer("s3", 1, { available: 8, reserved: 2, used: 0 });
  });

  test("S4 insufficient_credits asked exactly once more, at once", async () => {
    await seedAccount(admin, "s4");
    const seen = recorder();
    const client = adminClient(server.url, seen.hooks);

    const refused = await client.reserve("s4", 11).catch((e) => e);
    assert.ok(refused instanceof ProblemError);
    assert.equal(refused.code, "insufficient_credits");
    assert.equal(refused.status, 409);
    assert.equal(refused.available, 10);
    assert.equal(refused.requested, 11);
    assert.equal(refused.detail, "Not enough credits: 10 available, 11 needed.");
    assert.equal(refused.attempts, 2);
    assert.deepEqual(seen.retries.map((r) => [r.reason, r.waitMs]), [["insufficient_credits", 0]]);

    const once = adminClient(server.url, { retry: { retryInsufficientCreditsOnce: false } });
    assert.equal((await once.reserve("s4", 11).catch((e) => e)).attempts, 1, "with the retry switched off");
    const debit = await client.debit("s4", 11, "d-s4", "refund").catch((e) => e);
    assert.equal(debit.code, "insufficient_credits");
    assert.equal(debit.attempts, 1, "only reserve asks again");

    await assertServer("s4", 0, { available: 10, reserved: 0, used: 0 });
  });

  test("S5 503 + Retry-After honoured, same body", async () => {
    // Back-off 20 ms, cap 2 s: only the header can make the wait 1 s.
    const { p, seen, client } = await scenario("s5", ["--answer-503-first", "1", "--retry-after-s", "1"]);

    const started = performance.now();
    const transfer = await client.credit("s5", 5, "buy-503");
    const elapsedMs = performance.now() - started;

    assert.equal(transfer.event.reference, "buy-503");
    assert.equal(seen.answers.at(-1).attempts, 2);
    assert.deepEqual(seen.retries.map((r) => [r.reason, r.waitMs]), [["unavailable", 1000]], "the header raised the 20 ms wait");
    assert.ok(elapsedMs >= 990, `the resend waited for Retry-After (${elapsedMs.toFixed(0)} ms)`);
    assertSent(p, ["503", "none"]);
    assert.equal((await balances(admin, "s5")).available, 15);
    const credited = (await admin.events("s5")).events.filter((e) => e.type === "credited" && e.reference === "buy-503");
    assert.equal(credited.length, 1);
  });

  test("S6 503 given up after the attempts", async () => {
    const { p, client } = await scenario("s6", ["--answer-503-first", "4", "--retry-after-s", "0"]);

    const error = await client.getAccount("s6").catch((e) => e);

    assert.ok(error instanceof ProblemError);
    assert.equal(error.code, "unavailable");
    assert.equal(error.status, 503);
    assert.equal(error.attempts, 4);
    assertSent(p, ["503", "503", "503", "503"]);
  });

  test("S7 create_key not resent once it may have arrived", async () => {
    await seedAccount(admin, "s7");
    const answered503 = await proxy("--answer-503-first", "1");
    const error503 = await adminClient(answered503.url).createKey("s7").catch((e) => e);
    assert.equal(error503.code, "unavailable");
    assert.equal(error503.attempts, 1);
    assert.equal(answered503.requests().length, 1);

    const dropped = await proxy("--drop-first-responses", "1");
    const lost = await adminClient(dropped.url).createKey("s7").catch((e) => e);
    assert.ok(lost instanceof TransportError);
    assert.equal(lost.code, "connection_lost");
    assert.equal(lost.attempts, 1);
    assert.equal(dropped.requests().length, 1);
    // The same holds for the other calls a second send would change: a rate-limit check counts.
  });

  test("S11 nothing listening: bounded attempts, and a call never sent is sent again", async () => {
    const client = adminClient(`http://127.0.0.1:${await unusedPort()}`);
    const started = performance.now();
    const error = await client.getAccount("s11").catch((e) => e);
    assert.ok(error instanceof TransportError);
    assert.equal(error.code, "connect");
    assert.equal(error.maybeDelivered, false);
    assert.equal(error.attempts, 4);
    assert.ok(performance.now() - started < 10_000, "bounded: no attempt waits for a time-out");
    // create_key is sent again when it certainly never reached the server.
    assert.equal((await client.createKey("s11").catch((e) => e)).attempts, 4);
  });

  test("S5 a Retry-After beyond the budget is reported at once", async () => {
    const { p, seen, client } = await scenario("s5b", ["--answer-503-first", "1", "--retry-after-s", "30"]);
    const error = await client.getAccount("s5b").catch((e) => e);
    assert.ok(error instanceof ProblemError);
    assert.equal(error.status, 503);
    assert.equal(error.attempts, 1, "30 s asked, 10 s of budget: waiting would be in vain");
    assert.equal(error.retryAfterMs, 30_000);
    assert.deepEqual(seen.retries, []);
    assertSent(p, ["503"]);
  });

  // A balancer in front of two instances that restart one after the other: for 1.5 s it drops
  // answers, resets connections and answers 502/503/504 itself.
  test("S12 reserve with a request id rides out a rolling restart and charges once", async () => {
    await seedAccount(admin, "s12");
    const p = await proxy("--outage-ms", "1500"); // drop, 502, reset, 504, 503, drop, ...
    const seen = recorder();
    const client = new TollgateClient({ baseUrl: p.url, key: ADMIN_KEY, ...seen.hooks }); // the default policy

    const started = performance.now();
    const hold = await client.reserve("s12", 3, { requestId: "click-s12" });
    const elapsedMs = performance.now() - started;
    const reserved = seen.answers.at(-1);
    const committed = await client.commit(hold.hold_id, 2);

    assert.equal(reserved.status, 200, "the first attempt (its answer dropped) made the hold");
    assert.ok(reserved.attempts >= 4, `attempts ${reserved.attempts}`);
    assert.ok(elapsedMs >= 1500, `rode out the outage (${elapsedMs.toFixed(0)} ms)`);
    const sent = p.requests().filter((r) => r.target === "/v1/holds");
    assert.equal(sent.length, reserved.attempts);
    assert.equal(new Set(sent.map((r) => r.body)).size, 1, "every attempt sends the same bytes");
    assert.deepEqual(sent.slice(0, 3).map((r) => r.fault), ["outage-drop", "outage-502", "outage-reset"]);
    assert.equal(sent.at(-1).fault, "none");
    assert.ok(seen.retries.some((r) => r.reason === "http_502"));
    assert.equal(committed.status, "committed");
    await assertServer("s12", 1, { available: 8, reserved: 0, used: 2 });
    const reservedEvents = (await admin.events("s12")).events.filter((e) => e.type === "reserved");
    assert.equal(reservedEvents.length, 1, "reserved once");
  });

  test("S13 a call without an id is not resent once it may have reached the server", async () => {
    await seedAccount(admin, "s13");
    const hold = await admin.reserve("s13", 1, { ttlMs: 60_000 });
    const dropped = await proxy("--outage-ms", "600000", "--outage-faults", "drop");
    const lost = await adminClient(dropped.url).extend(hold.hold_id, 600_000).catch((e) => e);
    assert.ok(lost instanceof TransportError);
    assert.equal(lost.code, "connection_lost");
    assert.equal(lost.attempts, 1);
    assert.equal(dropped.requests().length, 1);
    assert.ok((await admin.getHold(hold.hold_id)).expires_at > hold.expires_at, "the one send acted");
    for (const status of ["502", "503", "504"]) {
      const answered = await proxy("--outage-ms", "600000", "--outage-faults", status);
      const refused = await adminClient(answered.url).extend(hold.hold_id, 600_000).catch((e) => e);
      assert.ok(refused instanceof ProblemError);
      assert.equal(refused.status, Number(status));
      assert.equal(refused.code, `http_${status}`);
      assert.equal(refused.attempts, 1);
      assert.equal(answered.requests().length, 1);
    }
    // Never reached the server (nothing listens): sent again.
    const unsent = await adminClient(`http://127.0.0.1:${await unusedPort()}`).extend(hold.hold_id, 600_000).catch((e) => e);
    assert.equal(unsent.code, "connect");
    assert.equal(unsent.attempts, 4);
  });

  test("S14 the budget bounds a call and can be set per call", async () => {
    await seedAccount(admin, "s14");
    const p = await proxy("--outage-ms", "600000", "--outage-faults", "502");
    const client = adminClient(p.url, { retry: { budgetMs: 1000, attemptsMax: 20, backoffInitialMs: 50, backoffMaxMs: 200 } });
    const started = performance.now();
    const error = await client.getAccount("s14").catch((e) => e);
    const elapsedMs = performance.now() - started;
    assert.ok(error instanceof ProblemError);
    assert.equal(error.code, "http_502");
    assert.ok(error.attempts > 3, `attempts ${error.attempts}`);
    assert.ok(elapsedMs > 500 && elapsedMs < 1500, `within the budget and one attempt (${elapsedMs.toFixed(0)} ms)`);
    const once = await client.withRetry({ budgetMs: 0 }).getAccount("s14").catch((e) => e);
    assert.equal(once.attempts, 1, "this call only: no retry at all");
    assert.equal(client.retry.budgetMs, 1000, "the client's own policy is unchanged");
    assert.throws(() => client.withRetry({ budgetMs: -1 }), ArgumentError);
    assert.deepEqual({ ...DEFAULT_RETRY_POLICY }, {
      budgetMs: 10_000, attemptsMax: 20, backoffInitialMs: 100, backoffMaxMs: 2000, retryInsufficientCreditsOnce: true,
    });
  });
});

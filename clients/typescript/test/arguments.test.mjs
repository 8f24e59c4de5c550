// S10 of clients/testing/scenarios.md: bad arguments are rejected by the client before any request —
// through the lossy proxy, whose log must stay empty, against a real server whose balances must not
// move. Also the client's own options.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";

import { ArgumentError, TollgateClient } from "../dist/index.js";
import { adminClient, balances, holdsOf, seedAccount } from "./support/fixture.mjs";
import { startProxy, startServer } from "./support/processes.mjs";

const BAD_AMOUNTS = [0, -1, 1.5, "3", 2 ** 53, NaN, Infinity, 3n, null];
const BAD_IDS = ["has space", "", "x".repeat(129), "slash/in/it", "ünïcode", 7, null];

describe("S10 bad arguments rejected before any request", () => {
  let server;
  let proxy;
  let admin;
  let client; // through the proxy

  before(async () => {
    server = await startServer();
    admin = adminClient(server.url);
    await seedAccount(admin, "acct");
    proxy = await startProxy(server.port);
    client = adminClient(proxy.url);
  });
  after(async () => {
    await proxy?.stop();
    await server?.stop();
  });

  async function refused(promise, field) {
    const error = await promise.then(
      () => assert.fail(`accepted a bad ${field}`),
      (e) => e,
    );
    assert.ok(error instanceof ArgumentError, `${field}: ${error}`);
    assert.equal(error.code, "invalid_argument");
    assert.equal(error.status, 0);
    assert.equal(error.attempts, 0);
    assert.equal(error.field, field);
    assert.ok(error.detail.includes(field), error.detail);
  }

  test("amounts: 0, negative, fractional, string, 2^53 and others", async () => {
    for (const amount of BAD_AMOUNTS) {
      await refused(client.reserve("acct", amount, { requestId: "r-1" }), "amount");
      await refused(client.credit("acct", amount, "ref-1"), "amount");
      await refused(client.debit("acct", amount, "ref-2", "why"), "amount");
      await refused(client.submitJob({ accountId: "acct", cost: amount, provider: "p", input: {} }), "cost");
      await refused(client.refundHold("hold_1", { amount, reason: "r" }), "amount");
      await refused(client.refundJob("job-1", { amount, reason: "r" }), "amount");
    }
    await refused(client.commit("hold_1", 0), "amount");
  });

  test("ids: with a space, empty, 129 characters, other characters, not strings", async () => {
    for (const id of BAD_IDS) {
      await refused(client.reserve(id, 1), "accountId");
      await refused(client.reserve("acct", 1, { requestId: id }), "requestId");
      await refused(client.credit("acct", 1, id), "reference");
      await refused(client.getAccount(id), "accountId");
      await refused(client.acquireLock("k", id, 1000), "owner");
      await refused(client.refundHold("hold_1", { reason: "r", requestId: id }), "requestId");
      await refused(client.refundJob(id, { reason: "r" }), "clientRequestId");
    }
    // "." and ".." are ids, but fetch reads them as relative paths: they cannot be a path segment.
    await refused(client.getAccount(".."), "accountId");
    await refused(client.getJob("."), "clientRequestId");
  });

  test("other arguments: TTLs, limits, waits, reasons, statuses, unknown options", async () => {
    await refused(client.reserve("acct", 1, { ttlMs: 0 }), "ttlMs");
    await refused(client.reserve("acct", 1, { metadata: [1] }), "metadata");
    await refused(client.reserve("acct", 1, { requestid: "typo" }), "options.requestid");
    await refused(client.listHolds({ limit: 1001 }), "options.limit");
    await refused(client.listHolds({ status: "open" }), "status");
    await refused(client.getJob("job-1", { waitMs: 60_001 }), "waitMs");
    await refused(client.release("hold_1", "x".repeat(1025)), "reason");
    await refused(client.acquireLock("k", "me", 86_400_001), "ttlMs");
    await refused(client.beginIdempotency("k", "", 1000), "fingerprint");
    await refused(client.finishIdempotency("k", "f", null), "response");
    await refused(client.checkRatelimit("login", "u", { cost: 0 }), "cost");
    await refused(client.getHold(""), "holdId");
    await refused(client.submitJob({ accountId: "acct", cost: 1, provider: "p", input: undefined }), "input");
    await refused(client.refundHold("hold_1", { reason: "" }), "reason");
    await refused(client.refundHold("hold_1", {}), "reason");
    await refused(client.refundHold("hold_1"), "reason");
    await refused(client.refundJob("job-1", { reason: "x".repeat(1025) }), "reason");
    await refused(client.refundJob("job-1", { reason: "r", requestid: "typo" }), "options.requestid");
    await refused(client.refundHold("", { reason: "r" }), "holdId");
    await refused(client.createKey("acct", { scopes: ["hold:write"] }), "scopes");
    await refused(client.createKey("acct", { scopes: [] }), "scopes");
    await refused(client.createKey("acct", { scopes: "read" }), "scopes");
    await refused(client.createKey("acct", { scopes: ["read", "read"] }), "scopes");
    await refused(client.createKey("acct", { scopes: ["admin"] }), "scopes");
    await refused(client.createKey("acct", { expiresAt: "tomorrow" }), "expiresAt");
    await refused(client.createKey("acct", { expiresAt: new Date("nonsense") }), "expiresAt");
    await refused(client.createKey("acct", { name: "" }), "name");
    await refused(client.createKey("acct", { name: "n".repeat(101) }), "name");
    await refused(client.createKey("acct", { expires: "2030-01-01T00:00:00Z" }), "options.expires");
    await refused(client.createAdminKey("read"), "scope");
    await refused(client.createAdminKey("admin", { scopes: ["admin"] }), "options.scopes");
    await refused(client.credit("acct", 1, "lot-1", { priority: 101 }), "priority");
    await refused(client.credit("acct", 1, "lot-1", { priority: -1 }), "priority");
    await refused(client.credit("acct", 1, "lot-1", { priority: "10" }), "priority");
    await refused(client.credit("acct", 1, "lot-1", { category: "gift" }), "category");
    await refused(client.credit("acct", 1, "lot-1", { expiresAt: "next week" }), "expiresAt");
    await refused(client.credit("acct", 1, "lot-1", { expiresAt: new Date("nonsense") }), "expiresAt");
    await refused(client.credit("acct", 1, "lot-1", { expires: "2030-01-01T00:00:00Z" }), "options.expires");
    await refused(client.listLots("has space"), "accountId");
    await refused(client.listLots("acct", { status: "open" }), "status");
    await refused(client.listLots("acct", { limit: 0 }), "options.limit");
    for (const quantity of BAD_AMOUNTS) {
      await refused(client.reserve("acct", { feature: "image.gen", quantity }), "quantity");
      await refused(client.checkHold("acct", { feature: "image.gen", quantity }), "quantity");
      await refused(client.commit("hold_1", { quantity }), "quantity");
      await refused(client.setPrice("image.gen", quantity), "creditsPerUnit");
    }
    for (const id of BAD_IDS) {
      await refused(client.reserve("acct", { feature: id }), "feature");
      await refused(client.checkHold("acct", { feature: id }), "feature");
      await refused(client.setPrice(id, 1), "feature");
      await refused(client.getPrice(id), "feature");
      await refused(client.listPriceVersions(id), "feature");
      await refused(client.checkHold(id, 1), "accountId");
    }
    await refused(client.getPrice(".."), "feature");
    await refused(client.reserve("acct", { quantity: 2 }), "feature");
    await refused(client.reserve("acct", { feature: "image.gen", amount: 2 }), "amount.amount");
    await refused(client.checkHold("acct"), "amount");
    await refused(client.commit("hold_1", { quantity: 1, amount: 1 }), "amount.amount");
    await refused(client.commit("hold_1", {}), "quantity");
    await refused(client.withHold("acct", { feature: "image.gen", quantity: 0 }, {}, () => 1), "quantity");
    await refused(client.listPrices({ limit: 0 }), "options.limit");
    await refused(client.listPrices({ startingAfter: "a b" }), "options.startingAfter");
    await refused(client.listPriceVersions("image.gen", { startingAfter: 0 }), "options.startingAfter");
    await refused(client.listPriceVersions("image.gen", { startingAfter: "2" }), "options.startingAfter");
    await refused(client.listPriceVersions("image.gen", { after: 2 }), "options.after");
  });

  test("nothing reached the proxy and nothing changed on the server", async () => {
    assert.deepEqual(proxy.requests(), []);
    assert.deepEqual(await balances(admin, "acct"), { available: 10, reserved: 0, used: 0 });
    assert.equal((await holdsOf(admin, "acct")).length, 0);
  });
});

describe("client options are checked when the client is made", () => {
  function refusedOption(options, field) {
    assert.throws(
      () => new TollgateClient(options),
      (e) => e instanceof ArgumentError && e.field === field,
    );
  }

  test("a base URL that cannot work", () => {
    refusedOption({ baseUrl: "127.0.0.1:8080" }, "options.baseUrl");
    refusedOption({ baseUrl: "ftp://127.0.0.1" }, "options.baseUrl");
    refusedOption({ baseUrl: "http://user:pw@127.0.0.1" }, "options.baseUrl");
    refusedOption({ baseUrl: "http://127.0.0.1/?x=1" }, "options.baseUrl");
    refusedOption({}, "options.baseUrl");
  });

  test("retry policy, time-out, prefix and unknown options", () => {
    const baseUrl = "http://127.0.0.1:8080";
    refusedOption({ baseUrl, retry: { attemptsMax: 0 } }, "options.retry.attemptsMax");
    refusedOption({ baseUrl, retry: { budgetMs: -1 } }, "options.retry.budgetMs");
    refusedOption({ baseUrl, retry: { backoffInitialMs: 500, backoffMaxMs: 100 } }, "options.retry.backoffMaxMs");
    refusedOption({ baseUrl, retry: { attempts: 3 } }, "options.retry.attempts");
    refusedOption({ baseUrl, timeoutMs: 0 }, "options.timeoutMs");
    refusedOption({ baseUrl, requestIdPrefix: "has space" }, "options.requestIdPrefix");
    refusedOption({ baseUrl, timeout: 5 }, "options.timeout");
  });
});

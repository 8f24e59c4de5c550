// Every call of the client, once, against a real `tollgate serve` (with a fake AI provider for the
// jobs and a rate-limit policy): each answer's typed shape and the server's problems as
// ProblemErrors. The last test checks that every public method of TollgateClient was called here,
// so a method added without a test fails this suite.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";

import { ArgumentError, ProblemError, TollgateClient, lockHolder } from "../dist/index.js";
import { adminClient, balances, seedAccount } from "./support/fixture.mjs";
import { startFakeProvider, startServer, unusedPort } from "./support/processes.mjs";

describe("every call once", () => {
  let provider;
  let server;
  let client; // records which methods are called
  const called = new Set();

  before(async () => {
    provider = await startFakeProvider();
    server = await startServer({
      config: `
[providers.imagegen]
url = "${provider.url}/generate"
status_url = "${provider.url}/status/{id}"
timeout_ms = 5000
expected_duration_ms = 100

[ratelimits.login]
limit = 2
period_ms = 60000
store = "shared"
`,
    });
    const real = adminClient(server.url);
    client = new Proxy(real, {
      get(target, name) {
        const value = target[name];
        if (typeof value !== "function") return value;
        called.add(name);
        return value.bind(target);
      },
    });
  });
  after(async () => {
    await server?.stop();
    await provider?.stop();
  });

  test("operations: healthz, readyz, metrics, openapi", async () => {
    assert.deepEqual(await client.healthz(), { status: "ok" });
    const ready = await client.readyz();
    assert.equal(ready.status, "ready");
    assert.match(await client.metrics(), /^# (HELP|TYPE) tollgate_/m);
    const doc = await client.openapi();
    assert.ok("/v1/holds" in doc.paths);
  });

  test("accounts: create (and again), read, list, update, credit, debit, transfer, events, feed", async () => {
    const created = await client.createAccount("calls", { overdraftLimit: 0, maxActiveHolds: 5 });
    assert.equal(created.account_id, "calls");
    assert.equal(created.max_active_holds, 5);
    assert.equal(created.frozen, false);
    assert.equal(created.frozen_reason, null, "a fresh account: frozen_reason null, not absent");
    assert.deepEqual(await client.createAccount("calls", { overdraftLimit: 0, maxActiveHolds: 5 }), created, "the same settings: the account");
    const conflict = await client.createAccount("calls", { maxActiveHolds: 6 }).catch((e) => e);
    assert.equal(conflict.code, "conflict");
    assert.equal(conflict.status, 409);

    const credited = await client.credit("calls", 20, "buy-1");
    assert.equal(credited.event.type, "credited");
    assert.equal(credited.account.available, 20);
    assert.deepEqual((await client.credit("calls", 20, "buy-1")).account, credited.account, "the same reference adds nothing");
    const mismatch = await client.credit("calls", 21, "buy-1").catch((e) => e);
    assert.equal(mismatch.code, "idempotency_mismatch");
    const debited = await client.debit("calls", 2, "refund-1", "a refund");
    assert.equal(debited.account.available, 18);
    assert.equal(debited.account.purchased, 18);

    const account = await client.getAccount("calls");
    assert.equal(account.available + account.reserved + account.used, account.purchased);
    const page = await client.listAccounts({ limit: 1 });
    assert.equal(page.accounts.length, 1);
    assert.equal(typeof page.has_more, "boolean");
    const updated = await client.updateAccount("calls", { maxActiveHolds: null, frozen: false });
    assert.equal(updated.max_active_holds, null);

    const transfer = await client.getTransfer("refund-1");
    assert.deepEqual([transfer.kind, transfer.amount, transfer.account_id], ["debit", 2, "calls"]);
    const events = await client.events("calls", { after: 0, limit: 100 });
    const types = events.events.map((e) => e.type);
    assert.deepEqual(types.filter((t) => t !== "account_updated"), ["credited", "debited"]);
    assert.equal(types.at(-1), "account_updated");
    const feed = await client.feed({ after: 0, limit: 1000, waitMs: 0 });
    assert.ok(feed.events.some((e) => e.reference === "buy-1"));
    assert.ok(feed.next_after >= events.next_after);
    // Balance notices: 18 → 14 crosses a threshold of 15 down; setting it wrote no notice.
    const noticed = await client.updateAccount("calls", { lowBalanceThreshold: 15 });
    assert.equal(noticed.low_balance_threshold, 15);
    await client.debit("calls", 4, "notice-1", "low");
    const tail = await client.events("calls", { after: events.next_after });
    assert.deepEqual(tail.events.map((e) => e.type), ["account_updated", "debited", "balance_low"]);
    assert.equal((await client.updateAccount("calls", { lowBalanceThreshold: null })).low_balance_threshold, null);
    const missing = await client.getAccount("nobody").catch((e) => e);
    assert.ok(missing instanceof ProblemError);
    assert.deepEqual([missing.code, missing.status], ["not_found", 404]);
  });

  test("holds: reserve, read, list, extend, commit, release", async () => {
    await seedAccount(client, "holder");
    const hold = await client.reserve("holder", 4, { requestId: "calls-r1", ttlMs: 60_000, metadata: { kiosk: 3 } });
    assert.deepEqual([hold.status, hold.amount, hold.request_id], ["active", 4, "calls-r1"]);
    assert.deepEqual(hold.metadata, { kiosk: 3 });
    assert.equal((await client.reserve("holder", 4, { requestId: "calls-r1" })).hold_id, hold.hold_id, "the same id: that hold");
    const replay = await client.reserveWithStatus("holder", 4, { requestId: "calls-r1" });
    assert.deepEqual([replay.status, replay.hold.hold_id], [200, hold.hold_id], "a replay: 200");
    const quick = client.withRetry({ budgetMs: 0 });
    assert.equal(quick.retry.budgetMs, 0);
    assert.equal((await quick.getHold(hold.hold_id)).hold_id, hold.hold_id, "the same connection, another policy");
    assert.equal((await client.getHold(hold.hold_id)).hold_id, hold.hold_id);
    const listed = await client.listHolds({ accountId: "holder", status: "active", requestId: "calls-r1", limit: 10 });
    assert.deepEqual(listed.holds.map((h) => h.hold_id), [hold.hold_id]);
    const extended = await client.extend(hold.hold_id, 120_000);
    assert.ok(extended.expires_at > hold.expires_at);
    const committed = await client.commit(hold.hold_id, 3);
    assert.deepEqual([committed.status, committed.committed_amount], ["committed", 3]);
    assert.equal((await client.release(hold.hold_id).catch((e) => e)).code, "hold_committed");

    const other = await client.reserve("holder", 2);
    assert.match(other.request_id, /^client-[0-9a-f]{16}$/, "an id made by the client");
    const released = await client.release(other.hold_id, "changed my mind");
    assert.deepEqual([released.status, released.release_reason], ["released", "changed my mind"]);
    const viaHelper = await client.withHold("holder", 1, {}, (h) => h.hold);
    assert.equal(viaHelper.status, "active", "the work saw the hold active; withHold committed it after");
    const account = await client.getAccount("holder");
    assert.deepEqual([account.available, account.reserved, account.used], [6, 0, 4]);
  });

  test("credit lots: a credit's expiry, priority and category; listLots in spending order; a hold's draw", async () => {
    await seedAccount(client, "lots"); // its seed lot: 10, priority 50, no expiry
    const promo = await client.credit("lots", 5, "lots-promo", { expiresAt: new Date(Date.now() + 30 * 86_400_000), priority: 10, category: "promotional" });
    assert.match(promo.event.lot_id, /^lot_/);
    const dated = await client.credit("lots", 7, "lots-dated", { expiresAt: "2099-01-31T12:00:00Z" });
    const replay = await client.credit("lots", 5, "lots-promo", { priority: 90 });
    assert.equal(replay.event.event_id, promo.event.event_id, "a replay answers the first credit");

    const all = await client.listLots("lots");
    assert.deepEqual(all.lots.map((l) => l.lot_id).slice(0, 2), [promo.event.lot_id, dated.event.lot_id]);
    const [first, second, seed] = all.lots;
    assert.deepEqual([first.category, first.priority, first.amount, first.status], ["promotional", 10, 5, "active"]);
    assert.ok(second.expires_at.startsWith("2099-01-31T12:00:00"), second.expires_at);
    assert.deepEqual([seed.category, seed.priority, seed.reference, seed.expires_at], ["paid", 50, "seed-lots", undefined]);
    assert.equal(all.has_more, false);

    const hold = await client.reserve("lots", 8);
    assert.deepEqual(hold.lots, [{ lot_id: first.lot_id, amount: 5 }, { lot_id: second.lot_id, amount: 3 }]);
    await client.commit(hold.hold_id, 5);
    const spent = await client.listLots("lots", { status: "spent" });
    assert.deepEqual(spent.lots.map((l) => l.lot_id), [first.lot_id]);
    const one = await client.listLots("lots", { status: "active", limit: 1 });
    assert.equal(one.has_more, true);
    const rest = await client.listLots("lots", { status: "active", startingAfter: one.lots[0].lot_id });
    assert.deepEqual(rest.lots.map((l) => l.lot_id), [seed.lot_id]);

    const past = await client.credit("lots", 1, "lots-past", { expiresAt: "2020-01-01T00:00:00Z" }).catch((e) => e);
    assert.ok(past instanceof ProblemError);
    assert.deepEqual([past.status, past.code], [400, "invalid_request"]);
    assert.ok(past.detail.includes("expires_at"), past.detail);
    const missing = await client.listLots("nobody").catch((e) => e);
    assert.deepEqual([missing.status, missing.code], [404, "not_found"]);
  });

  test("prices: setPrice (and again), getPrice, listPrices, listPriceVersions; a hold by feature; commit by quantity; checkHold", async () => {
    await seedAccount(client, "priced"); // 10 credits
    const first = await client.setPrice("image.gen", 2);
    assert.deepEqual([first.feature, first.credits_per_unit, first.version], ["image.gen", 2, 1]);
    assert.deepEqual(await client.setPrice("image.gen", 2), first, "the same price again changes nothing");
    await client.setPrice("text.tokens", 1);

    const hold = await client.reserve("priced", { feature: "image.gen", quantity: 3 });
    assert.deepEqual([hold.amount, hold.feature, hold.quantity, hold.unit_price, hold.price_version], [6, "image.gen", 3, 2, 1]);
    const second = await client.setPrice("image.gen", 5);
    assert.deepEqual([second.credits_per_unit, second.version], [5, 2]);
    assert.deepEqual(await client.getPrice("image.gen"), second);
    assert.equal((await client.getHold(hold.hold_id)).unit_price, 2, "a hold keeps the price it was reserved at");
    const committed = await client.commit(hold.hold_id, { quantity: 2 });
    assert.deepEqual([committed.status, committed.committed_amount, committed.unit_price], ["committed", 4, 2]);
    assert.deepEqual(await balances(client, "priced"), { available: 6, reserved: 0, used: 4 });

    const listed = await client.listPrices();
    assert.deepEqual(listed.prices.map((p) => [p.feature, p.credits_per_unit]), [["image.gen", 5], ["text.tokens", 1]]);
    assert.equal(listed.has_more, false);
    const firstPage = await client.listPrices({ limit: 1 });
    assert.equal(firstPage.has_more, true);
    const nextPage = await client.listPrices({ startingAfter: firstPage.prices[0].feature });
    assert.deepEqual(nextPage.prices.map((p) => p.feature), ["text.tokens"]);
    const versions = await client.listPriceVersions("image.gen");
    assert.deepEqual(versions.versions.map((p) => [p.version, p.credits_per_unit]), [[2, 5], [1, 2]]);
    assert.equal(versions.versions[1].updated_at, first.updated_at, "each version: when it was set");
    const older = await client.listPriceVersions("image.gen", { limit: 1, startingAfter: 2 });
    assert.deepEqual([older.versions.map((p) => p.version), older.has_more], [[1], false]);

    const yes = await client.checkHold("priced", 6);
    assert.deepEqual(yes, { allowed: true, account_id: "priced", available: 6, requested: 6 });
    const no = await client.checkHold("priced", { feature: "image.gen", quantity: 2 });
    assert.deepEqual([no.allowed, no.requested, no.feature, no.quantity, no.unit_price, no.reason], [false, 10, "image.gen", 2, 5, "insufficient_credits"]);
    assert.equal(no.detail, "Not enough credits: 6 available, 10 needed.");
    assert.deepEqual(await balances(client, "priced"), { available: 6, reserved: 0, used: 4 }, "a check writes nothing");

    const unknown = await client.reserve("priced", { feature: "video.gen" }).catch((e) => e);
    assert.ok(unknown instanceof ProblemError);
    assert.deepEqual([unknown.status, unknown.code], [400, "invalid_request"]);
    assert.ok(unknown.detail.includes("known features: image.gen, text.tokens"), unknown.detail);
    const byAmount = await client.reserve("priced", 1);
    const wrongCommit = await client.commit(byAmount.hold_id, { quantity: 1 }).catch((e) => e);
    assert.deepEqual([wrongCommit.status, wrongCommit.code], [400, "invalid_request"]);
    const none = await client.getPrice("video.gen").catch((e) => e);
    assert.deepEqual([none.status, none.code], [404, "not_found"]);
    const noVersions = await client.listPriceVersions("video.gen").catch((e) => e);
    assert.deepEqual([noVersions.status, noVersions.code], [404, "not_found"]);
    const noAccount = await client.checkHold("nobody", 1).catch((e) => e);
    assert.deepEqual([noAccount.status, noAccount.code], [404, "not_found"]);
    const viaHelper = await client.withHold("priced", { feature: "text.tokens", quantity: 2 }, {}, async (h) => {
      await h.commit({ quantity: 1 });
      return h.hold;
    });
    assert.deepEqual([viaHelper.status, viaHelper.committed_amount], ["committed", 1]);
  });

  test("keys: create, list, use, revoke", async () => {
    await seedAccount(client, "kiosk-1");
    await seedAccount(client, "kiosk-2");
    const key = await client.createKey("kiosk-1");
    assert.match(key.secret, /./);
    const keys = await client.listKeys({ accountId: "kiosk-1", limit: 10 });
    assert.deepEqual(keys.keys.map((k) => k.key_id), [key.key_id]);
    assert.ok(keys.keys.every((k) => !("secret" in k)));

    const kiosk = new TollgateClient({ baseUrl: server.url, key: key.secret });
    assert.equal((await kiosk.getAccount("kiosk-1")).account_id, "kiosk-1");
    assert.equal((await kiosk.getAccount("kiosk-2").catch((e) => e)).status, 404, "another account does not exist for it");
    assert.equal((await kiosk.credit("kiosk-1", 1, "self-1").catch((e) => e)).code, "forbidden");

    const revoked = await client.revokeKey(key.key_id);
    assert.deepEqual([revoked.key_id, revoked.revoked], [key.key_id, true]);
    assert.equal((await kiosk.getAccount("kiosk-1").catch((e) => e)).code, "unauthorized");
  });

  test("keys with scopes, expiry and a name; admin keys; whoami; the missing scope", async () => {
    await seedAccount(client, "scoped");
    const expires = new Date(Date.now() + 30 * 86_400_000);
    const key = await client.createKey("scoped", { scopes: ["read", "holds:write"], expiresAt: expires, name: "kiosk 9" });
    assert.deepEqual(key.scopes, ["holds:write", "read"], "the canonical order");
    assert.deepEqual([key.account_id, key.name], ["scoped", "kiosk 9"]);
    assert.equal(typeof key.expires_at, "string");
    const plain = await client.createKey("scoped");
    assert.deepEqual([plain.scopes, plain.name, plain.expires_at], [["holds:write", "jobs:write", "read"], null, null]);
    const listed = (await client.listKeys({ accountId: "scoped" })).keys.find((k) => k.key_id === key.key_id);
    assert.deepEqual([listed.scopes, listed.name, listed.expires_at], [["holds:write", "read"], "kiosk 9", key.expires_at]);

    const reader = await client.createKey("scoped", { scopes: ["read"] });
    const kiosk = new TollgateClient({ baseUrl: server.url, key: reader.secret });
    const me = await kiosk.whoami();
    assert.deepEqual([me.key_id, me.account_id, me.scopes], [reader.key_id, "scoped", ["read"]]);
    assert.equal((await kiosk.getAccount("scoped")).available, 10);
    const refused = await kiosk.reserve("scoped", 1).catch((e) => e);
    assert.ok(refused instanceof ProblemError, String(refused));
    assert.deepEqual([refused.status, refused.code, refused.missingScope], [403, "forbidden", "holds:write"]);
    assert.match(refused.detail, /holds:write/);
    assert.equal((await kiosk.cancelJob("no-such-job").catch((e) => e)).missingScope, "jobs:write");
    assert.deepEqual(await balances(client, "scoped"), { available: 10, reserved: 0, used: 0 });

    const adminMe = await client.whoami();
    assert.deepEqual([adminMe.key_id, adminMe.account_id, adminMe.scopes, adminMe.created_at], ["admin", null, ["admin"], null]);
    const auditorKey = await client.createAdminKey("admin:read", { name: "auditor" });
    assert.deepEqual([auditorKey.account_id, auditorKey.scopes, auditorKey.name], [null, ["admin:read"], "auditor"]);
    const auditor = new TollgateClient({ baseUrl: server.url, key: auditorKey.secret });
    assert.deepEqual((await auditor.whoami()).scopes, ["admin:read"]);
    assert.ok((await auditor.listAccounts()).accounts.length >= 1);
    const noCredit = await auditor.credit("scoped", 1, "auditor-1").catch((e) => e);
    assert.deepEqual([noCredit.status, noCredit.missingScope], [403, "admin"]);

    const past = await client.createKey("scoped", { expiresAt: "2020-01-01T00:00:00Z" }).catch((e) => e);
    assert.deepEqual([past.status, past.code, past.missingScope], [400, "invalid_request", undefined]);
    const brief = await client.createKey("scoped", { expiresAt: new Date(Date.now() + 1000) });
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const late = await new TollgateClient({ baseUrl: server.url, key: brief.secret }).getAccount("scoped").catch((e) => e);
    assert.deepEqual([late.status, late.code], [401, "unauthorized"]);
    assert.match(late.detail, /expired/);
  });

  test("webhook endpoints: create, read, change, rotate, delete", async () => {
    await seedAccount(client, "hooked");
    const made = await client.createWebhookEndpoint("https://hooks.example/ts", { eventTypes: ["balance_low"], accountId: "hooked", description: "ts" });
    assert.match(made.secret, /^whsec_/);
    assert.deepEqual([made.event_types, made.account_id, made.status], [["balance_low"], "hooked", "enabled"]);
    const read = await client.getWebhookEndpoint(made.endpoint_id);
    assert.ok(!("secret" in read));
    assert.ok((await client.listWebhookEndpoints({ limit: 100 })).endpoints.some((e) => e.endpoint_id === made.endpoint_id));
    const changed = await client.updateWebhookEndpoint(made.endpoint_id, { status: "disabled", eventTypes: null });
    assert.deepEqual([changed.status, changed.event_types], ["disabled", null]);
    const rotated = await client.rotateWebhookSecret(made.endpoint_id);
    assert.notEqual(rotated.secret, made.secret);
    assert.equal((await client.createWebhookEndpoint("ftp://hooks.example/").catch((e) => e)).code, "invalid_request");
    const deleted = await client.deleteWebhookEndpoint(made.endpoint_id);
    assert.deepEqual([deleted.endpoint_id, deleted.deleted], [made.endpoint_id, true]);
    assert.equal((await client.getWebhookEndpoint(made.endpoint_id).catch((e) => e)).status, 404);
  });

  test("webhook deliveries: list (filtered, paged) and replay", async () => {
    await seedAccount(client, "hook-deliveries");
    // Nothing listens there: every attempt fails, with an error and no status code.
    const made = await client.createWebhookEndpoint(`http://127.0.0.1:${await unusedPort()}/`, { accountId: "hook-deliveries" });
    assert.equal(typeof made.delivery_cursor, "number");
    await client.credit("hook-deliveries", 1, "hook-d-1");
    await client.credit("hook-deliveries", 1, "hook-d-2");
    let listed;
    for (const deadline = Date.now() + 20_000; ; await new Promise((r) => setTimeout(r, 200))) {
      listed = await client.listWebhookDeliveries(made.endpoint_id);
      if (listed.deliveries.length === 2 && listed.deliveries.every((d) => d.attempts >= 1)) break;
      assert.ok(Date.now() < deadline, `no attempts recorded: ${JSON.stringify(listed)}`);
    }
    const [newest, oldest] = listed.deliveries;
    assert.ok(newest.event_id > oldest.event_id, "newest event first");
    assert.deepEqual([newest.endpoint_id, newest.event_type, newest.status, newest.last_status_code], [made.endpoint_id, "credited", "pending", null]);
    assert.ok(newest.last_error && newest.next_attempt_at, JSON.stringify(newest));
    const first = await client.listWebhookDeliveries(made.endpoint_id, { status: "pending", limit: 1 });
    assert.deepEqual([first.deliveries.map((d) => d.webhook_id), first.has_more], [[newest.webhook_id], true]);
    const rest = await client.listWebhookDeliveries(made.endpoint_id, { limit: 1, startingAfter: newest.webhook_id });
    assert.deepEqual([rest.deliveries.map((d) => d.webhook_id), rest.has_more], [[oldest.webhook_id], false]);
    assert.deepEqual((await client.listWebhookDeliveries(made.endpoint_id, { status: "delivered" })).deliveries, []);

    const answers = [];
    const watched = adminClient(server.url, { onAnswer: (info) => answers.push(info) });
    const replayed = await watched.replayWebhookEndpoint(made.endpoint_id, oldest.event_id - 1);
    await client.replayWebhookEndpoint(made.endpoint_id, oldest.event_id - 1);
    assert.deepEqual(answers.map((a) => a.status), [202]);
    assert.equal(replayed.endpoint_id, made.endpoint_id);
    assert.ok(!("secret" in replayed));
    assert.ok(replayed.delivery_cursor <= oldest.event_id - 1, JSON.stringify(replayed));
    assert.equal((await client.replayWebhookEndpoint(made.endpoint_id, -1).catch((e) => e)) instanceof ArgumentError, true);
    assert.equal((await client.listWebhookDeliveries(made.endpoint_id, { status: "sent" }).catch((e) => e)) instanceof ArgumentError, true);
    assert.equal((await client.replayWebhookEndpoint("we_0000000000000000", 0).catch((e) => e)).status, 404);
    await client.deleteWebhookEndpoint(made.endpoint_id);
  });

  test("jobs: submit (and again), wait, list, history, cancel", async () => {
    await seedAccount(client, "painter");
    const job = await client.submitJob({ clientRequestId: "job-1", accountId: "painter", cost: 2, provider: "imagegen", input: { prompt: "a cat" } });
    assert.equal(job.client_request_id, "job-1");
    assert.equal((await client.submitJob({ clientRequestId: "job-1", accountId: "painter", cost: 2, provider: "imagegen", input: { prompt: "a cat" } })).hold_id, job.hold_id);
    const ended = await client.getJob("job-1", { waitMs: 10_000 });
    assert.equal(ended.status, "completed", JSON.stringify(ended));
    assert.equal(ended.charged, true);
    assert.deepEqual((await client.listJobs({ accountId: "painter", status: "completed", limit: 5 })).jobs.map((j) => j.client_request_id), ["job-1"]);
    const history = await client.jobHistory("job-1");
    assert.equal(history.entries[0].kind, "submitted");
    assert.equal((await client.cancelJob("job-1")).status, "completed", "an ended job keeps its end");
    const account = await client.getAccount("painter");
    assert.deepEqual([account.available, account.used], [8, 2]);
  });

  test("refunds: refundHold in part, again, too much, the rest; refundJob", async () => {
    await seedAccount(client, "refunded");
    const hold = await client.reserve("refunded", 4);
    assert.equal(hold.refunded_amount, 0);
    await client.commit(hold.hold_id, 3);
    const partial = await client.refundHold(hold.hold_id, { amount: 1, reason: "jammed print", requestId: "calls-rf-1" });
    assert.deepEqual([partial.status, partial.committed_amount, partial.refunded_amount], ["committed", 3, 1]);
    assert.deepEqual(await balances(client, "refunded"), { available: 8, reserved: 0, used: 2 });
    const again = await client.refundHold(hold.hold_id, { amount: 1, reason: "jammed print", requestId: "calls-rf-1" });
    assert.equal(again.refunded_amount, 1, "the same requestId again moves nothing");
    assert.deepEqual(await balances(client, "refunded"), { available: 8, reserved: 0, used: 2 });
    const mismatch = await client.refundHold(hold.hold_id, { amount: 2, reason: "jammed print", requestId: "calls-rf-1" }).catch((e) => e);
    assert.deepEqual([mismatch.code, mismatch.status], ["idempotency_mismatch", 422]);

    const exceeds = await client.refundHold(hold.hold_id, { amount: 3, reason: "too much" }).catch((e) => e);
    assert.ok(exceeds instanceof ProblemError, String(exceeds));
    assert.deepEqual([exceeds.code, exceeds.status, exceeds.attempts], ["refund_exceeds_charge", 409, 1]);
    assert.match(exceeds.detail, /at most 2/);
    const rest = await client.refundHold(hold.hold_id, { reason: "the rest" }); // no amount: all that is left
    assert.equal(rest.refunded_amount, 3);
    assert.deepEqual(await balances(client, "refunded"), { available: 10, reserved: 0, used: 0 });
    assert.equal((await client.refundHold(hold.hold_id, { reason: "nothing left" }).catch((e) => e)).code, "refund_exceeds_charge");
    const refunds = (await client.events("refunded")).events.filter((e) => e.type === "refunded");
    assert.deepEqual(refunds.map((e) => [e.amount, e.hold_id, e.reason]), [[1, hold.hold_id, "jammed print"], [2, hold.hold_id, "the rest"]]);
    assert.equal(refunds[0].reference, "calls-rf-1");
    assert.match(refunds[1].reference, /^client-[0-9a-f]{16}$/, "an id made by the client");
    const active = await client.reserve("refunded", 1);
    const notCharged = await client.refundHold(active.hold_id, { reason: "not charged yet" }).catch((e) => e);
    assert.deepEqual([notCharged.code, notCharged.status], ["conflict", 409]);

    assert.equal((await client.refundJob("no-such-job", { reason: "x" }).catch((e) => e)).status, 404);
    await client.submitJob({ clientRequestId: "job-rf", accountId: "refunded", cost: 3, provider: "imagegen", input: { prompt: "a dog" } });
    assert.equal((await client.getJob("job-rf", { waitMs: 10_000 })).status, "completed");
    const job = await client.refundJob("job-rf", { amount: 2, reason: "blurry", requestId: "calls-rf-job" });
    assert.deepEqual([job.client_request_id, job.status, job.refunded_amount], ["job-rf", "completed", 2]);
    assert.equal((await client.refundJob("job-rf", { amount: 2, reason: "blurry", requestId: "calls-rf-job" })).refunded_amount, 2);
    assert.equal((await client.refundJob("job-rf", { amount: 2, reason: "more" }).catch((e) => e)).code, "refund_exceeds_charge");
    assert.equal((await client.refundHold(job.hold_id, { reason: "a job's hold" }).catch((e) => e)).code, "conflict");
    assert.equal((await client.getHold(job.hold_id)).refunded_amount, 2);
    // 10 − 1 reserved − 3 charged + 2 refunded.
    assert.deepEqual(await balances(client, "refunded"), { available: 8, reserved: 1, used: 1 });
  });

  test("locks: acquire, read, renew, release, cancel", async () => {
    const lock = await client.acquireLock("report", "worker-1", 10_000);
    assert.deepEqual([lock.owner, lock.held], ["worker-1", true]);
    const held = await client.acquireLock("report", "worker-2", 10_000).catch((e) => e);
    assert.equal(held.code, "lock_held");
    assert.ok(held.expiresAt);
    assert.equal((await client.getLock("report")).fence, lock.fence);
    const holder = lockHolder(lock);
    assert.equal((await client.renewLock(holder, 20_000)).fence, lock.fence);
    const released = await client.releaseLock(holder);
    assert.equal(released.owner, null);
    const again = await client.acquireLock("report", "worker-2", 10_000);
    assert.ok(again.fence > lock.fence);
    assert.equal((await client.cancelLock("report")).cancelled, true);
    assert.equal((await client.renewLock(lockHolder(again), 10_000).catch((e) => e)).code, "lock_cancelled");
  });

  test("idempotency keys: begin, finish, begin again replays, abandon", async () => {
    const started = await client.beginIdempotency("upgrade-7", "plan=pro", 60_000);
    assert.equal(started.state, "started");
    const finished = await client.finishIdempotency("upgrade-7", "plan=pro", { charge: "ch_1" }, { attempt: started.attempt });
    assert.equal(finished.state, "finished");
    const replay = await client.beginIdempotency("upgrade-7", "plan=pro", 60_000);
    assert.deepEqual([replay.state, replay.response], ["finished", { charge: "ch_1" }]);
    assert.equal((await client.beginIdempotency("upgrade-7", "plan=max", 60_000).catch((e) => e)).code, "idempotency_mismatch");
    await client.beginIdempotency("upgrade-8", "plan=pro", 60_000);
    assert.equal((await client.abandonIdempotency("upgrade-8", "plan=pro")).state, "abandoned");
  });

  test("rate limits: check until refused, reset", async () => {
    const first = await client.checkRatelimit("login", "alice");
    assert.deepEqual([first.allowed, first.remaining, first.limit], [true, 1, 2]);
    await client.checkRatelimit("login", "alice", { cost: 1 });
    const limited = await client.checkRatelimit("login", "alice").catch((e) => e);
    assert.ok(limited instanceof ProblemError);
    assert.deepEqual([limited.code, limited.status, limited.attempts], ["rate_limited", 429, 1]);
    assert.ok(limited.retryAfterMs > 0);
    assert.deepEqual(await client.resetRatelimit("login", "alice"), { policy: "login", key: "alice", reset: true });
    assert.equal((await client.checkRatelimit("login", "alice")).remaining, 1);
  });

  test("audit, a raw call, and a new request id", async () => {
    const report = await client.audit();
    assert.ok(report.accounts_checked >= 5);
    assert.deepEqual(report.violations, []);
    assert.deepEqual((await client.audit({ accountId: "holder" })).accounts_checked, 1);
    const raw = await client.call("GET", "/v1/accounts/holder");
    assert.deepEqual([raw.status, raw.attempts, raw.body.account_id], [200, 1, "holder"]);
    assert.match(client.newRequestId(), /^client-[0-9a-f]{16}$/);
  });

  test("every public method of TollgateClient was called above", () => {
    const methods = Object.getOwnPropertyNames(TollgateClient.prototype).filter((m) => m !== "constructor" && m !== "json");
    assert.deepEqual(methods.filter((m) => !called.has(m)), []);
  });
});

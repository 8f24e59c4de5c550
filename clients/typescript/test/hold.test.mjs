// withHold against a real server: S8 and S9 of clients/testing/scenarios.md, and what withHold does
// when the work settles the hold itself or returns without settling it.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";

import { ArgumentError, ProblemError } from "../dist/index.js";
import { adminClient, balances, holdsOf, seedAccount } from "./support/fixture.mjs";
import { startServer } from "./support/processes.mjs";

describe("withHold", () => {
  let server;
  let client;

  before(async () => {
    server = await startServer();
    client = adminClient(server.url);
  });
  after(async () => {
    await server?.stop();
  });

  test("S8 hold context released on an exception", async () => {
    await seedAccount(client, "s8");
    const failure = new Error("the image generation failed");
    let seenHold;

    const thrown = await client
      .withHold("s8", 3, { requestId: "ctx-1" }, async (h) => {
        seenHold = h.hold;
        assert.deepEqual(await balances(client, "s8"), { available: 7, reserved: 3, used: 0 }, "reserved while it runs");
        throw failure;
      })
      .catch((e) => e);

    assert.equal(thrown, failure, "the work's own error reaches the caller");
    const hold = await client.getHold(seenHold.hold_id);
    assert.equal(hold.request_id, "ctx-1");
    assert.equal(hold.status, "released");
    assert.match(hold.release_reason, /the image generation failed/);
    assert.deepEqual(await balances(client, "s8"), { available: 10, reserved: 0, used: 0 });
  });

  test("S9 hold context commits what the work commits", async () => {
    await seedAccount(client, "s9");
    const result = await client.withHold("s9", 3, { requestId: "ctx-2" }, async (h) => {
      await h.commit(2);
      return "an image";
    });
    assert.equal(result, "an image");
    const [hold] = await holdsOf(client, "s9");
    assert.equal(hold.request_id, "ctx-2");
    assert.equal(hold.status, "committed");
    assert.equal(hold.committed_amount, 2);
    assert.deepEqual(await balances(client, "s9"), { available: 8, reserved: 0, used: 2 });
  });

  test("work that returns without settling commits the whole hold", async () => {
    await seedAccount(client, "whole");
    await client.withHold("whole", 4, { requestId: "ctx-whole" }, () => undefined);
    const [hold] = await holdsOf(client, "whole");
    assert.equal(hold.status, "committed");
    assert.equal(hold.committed_amount, 4);
    assert.deepEqual(await balances(client, "whole"), { available: 6, reserved: 0, used: 4 });
  });

  test("work that released the hold itself is not committed after", async () => {
    await seedAccount(client, "gave-back");
    await client.withHold("gave-back", 4, {}, (h) => h.release("the guest left"));
    const [hold] = await holdsOf(client, "gave-back");
    assert.equal(hold.status, "released");
    assert.equal(hold.release_reason, "the guest left");
    assert.deepEqual(await balances(client, "gave-back"), { available: 10, reserved: 0, used: 0 });
  });

  test("an exception after the work committed leaves the commit and reaches the caller", async () => {
    await seedAccount(client, "late-throw");
    const thrown = await client
      .withHold("late-throw", 3, {}, async (h) => {
        await h.commit(1);
        throw new Error("after the commit");
      })
      .catch((e) => e);
    assert.equal(thrown.message, "after the commit");
    const [hold] = await holdsOf(client, "late-throw");
    assert.equal(hold.status, "committed");
    assert.deepEqual(await balances(client, "late-throw"), { available: 9, reserved: 0, used: 1 });
  });

  test("not enough credits: the work never runs and the kiosk gets the showable detail", async () => {
    await seedAccount(client, "short", 2);
    let ran = false;
    const refused = await client.withHold("short", 3, {}, () => (ran = true)).catch((e) => e);
    assert.ok(refused instanceof ProblemError);
    assert.equal(refused.code, "insufficient_credits");
    assert.equal(refused.detail, "Not enough credits: 2 available, 3 needed.");
    assert.equal(ran, false);
    assert.equal((await holdsOf(client, "short")).length, 0);
  });

  test("a work that is not a function is refused before anything is reserved", async () => {
    await seedAccount(client, "no-work");
    await assert.rejects(client.withHold("no-work", 1, {}, "commit"), ArgumentError);
    assert.equal((await holdsOf(client, "no-work")).length, 0);
  });

  // S15: two clicks with one requestId share one hold; the click whose reserve was a replay never
  // releases it (the other click may still be generating).
  test("S15 the replayed click that fails does not release the other click's hold", async () => {
    await seedAccount(client, "dbl");
    let replayedSeen;
    const result = await client.withHold("dbl", 3, { requestId: "click-dbl" }, async (a) => {
      assert.equal(a.replayed, false);
      const thrown = await client
        .withHold("dbl", 3, { requestId: "click-dbl" }, async (b) => {
          replayedSeen = b.replayed;
          assert.equal(b.holdId, a.holdId);
          throw new Error("the second click's generation failed");
        })
        .catch((e) => e);
      assert.equal(thrown.message, "the second click's generation failed");
      assert.equal((await client.getHold(a.holdId)).status, "active", "still the first click's");
      await a.commit(2);
      return "an image";
    });
    assert.equal(result, "an image");
    assert.equal(replayedSeen, true);
    assert.equal((await holdsOf(client, "dbl")).length, 1);
    assert.deepEqual(await balances(client, "dbl"), { available: 8, reserved: 0, used: 2 });
  });

  test("S15 a replayed click that finishes first charges once; the failing maker cannot undo it", async () => {
    await seedAccount(client, "dbl2");
    let holdId;
    const thrown = await client
      .withHold("dbl2", 3, { requestId: "click-dbl2" }, async (a) => {
        holdId = a.holdId;
        await client.withHold("dbl2", 3, { requestId: "click-dbl2" }, () => "the second click's image");
        throw new Error("the first click's generation failed");
      })
      .catch((e) => e);
    assert.equal(thrown.message, "the first click's generation failed");
    const hold = await client.getHold(holdId);
    assert.equal(hold.status, "committed");
    assert.equal(hold.committed_amount, 3);
    assert.deepEqual(await balances(client, "dbl2"), { available: 7, reserved: 0, used: 3 });
  });

  test("a replay of a committed hold is not charged again; of a released one, the commit throws", async () => {
    await seedAccount(client, "again");
    await client.withHold("again", 3, { requestId: "again-1" }, (h) => h.commit(2));
    let replayed;
    await client.withHold("again", 3, { requestId: "again-1" }, (h) => (replayed = h.replayed));
    assert.equal(replayed, true);
    assert.deepEqual(await balances(client, "again"), { available: 8, reserved: 0, used: 2 });

    await client.withHold("again", 3, { requestId: "again-2" }, (h) => h.release("the guest left"));
    const refused = await client.withHold("again", 3, { requestId: "again-2" }, () => "work").catch((e) => e);
    assert.ok(refused instanceof ProblemError);
    assert.equal(refused.code, "hold_released");
    assert.deepEqual(await balances(client, "again"), { available: 8, reserved: 0, used: 2 });
  });
});

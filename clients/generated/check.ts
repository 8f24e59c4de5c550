// A client generated from docs/openapi.json (openapi-typescript-codegen, by ./check) used as an
// app would: create an account, credit it, reserve 3, commit 2, read the balances, and see a
// refusal arrive as the generated ApiError carrying the problem document; then price a feature,
// reserve by feature and quantity, commit by quantity, and check a reservation without making it. Compiled with tsc
// --strict together with the generated code, so a document that generates bad types fails here.
// Usage (./check does it): node dist/check.js BASE_URL ADMIN_KEY
// Node's process, declared here so that the check needs no @types/node.
declare const process: { argv: string[]; exitCode?: number };

import { AccountsService, ApiError, HoldsService, OpenAPI, PricesService, Problem } from "./generated";
import type { Account, Hold, HoldCheck, Price } from "./generated";

function expect(what: string, got: unknown, want: unknown): void {
  const ok = JSON.stringify(got) === JSON.stringify(want);
  console.log(`${ok ? "ok  " : "FAIL"} ${what}: ${JSON.stringify(got)}${ok ? "" : ` (expected ${JSON.stringify(want)})`}`);
  if (!ok) process.exitCode = 1;
}

async function main(): Promise<void> {
  const [baseUrl, key] = process.argv.slice(2);
  if (!baseUrl || !key) throw new Error("usage: node dist/check.js BASE_URL ADMIN_KEY");
  OpenAPI.BASE = baseUrl;
  OpenAPI.TOKEN = key;  // sent as Authorization: Bearer <key>

  const account: Account = await AccountsService.createAccount({ requestBody: { account_id: "kiosk-1" } });
  expect("createAccount → account_id", account.account_id, "kiosk-1");
  const credited = await AccountsService.creditAccount({
    accountId: "kiosk-1",
    requestBody: { amount: 10, reference: "payment-1" },
  });
  expect("creditAccount → event type, available", [credited.event.type, credited.account.available], ["credited", 10]);

  const hold: Hold = await HoldsService.reserveHold({ requestBody: { account_id: "kiosk-1", amount: 3, request_id: "gen-1" } });
  expect("reserveHold → status", hold.status, "active");
  const again: Hold = await HoldsService.reserveHold({ requestBody: { account_id: "kiosk-1", amount: 3, request_id: "gen-1" } });
  expect("reserveHold again, same request_id → same hold", again.hold_id, hold.hold_id);

  const committed: Hold = await HoldsService.commitHold({ holdId: hold.hold_id, requestBody: { amount: 2 } });
  expect("commitHold → status, committed_amount", [committed.status, committed.committed_amount], ["committed", 2]);

  const after: Account = await AccountsService.getAccount({ accountId: "kiosk-1" });
  expect("getAccount → available, reserved, used", [after.available, after.reserved, after.used], [8, 0, 2]);

  try {
    await HoldsService.reserveHold({ requestBody: { account_id: "kiosk-1", amount: 100, request_id: "gen-2" } });
    expect("reserveHold of 100 → refused", "accepted", "refused");
  } catch (e) {
    if (!(e instanceof ApiError)) throw e;
    const problem = e.body as Problem;
    expect("reserveHold of 100 → ApiError status, problem code", [e.status, problem.code], [409, "insufficient_credits"]);
  }

  const price: Price = await PricesService.setPrice({ feature: "image.gen", requestBody: { credits_per_unit: 2 } });
  expect("setPrice → feature, credits_per_unit, version", [price.feature, price.credits_per_unit, price.version], ["image.gen", 2, 1]);
  const priced: Hold = await HoldsService.reserveHold({
    requestBody: { account_id: "kiosk-1", feature: "image.gen", quantity: 3, request_id: "gen-3" },
  });
  expect("reserveHold by feature → amount, unit_price, price_version", [priced.amount, priced.unit_price, priced.price_version], [6, 2, 1]);
  await PricesService.setPrice({ feature: "image.gen", requestBody: { credits_per_unit: 5 } });
  const byQuantity: Hold = await HoldsService.commitHold({ holdId: priced.hold_id, requestBody: { quantity: 2 } });
  expect("commitHold by quantity → committed_amount (the frozen price)", byQuantity.committed_amount, 4);
  const check: HoldCheck = await HoldsService.checkHold({ requestBody: { account_id: "kiosk-1", feature: "image.gen", quantity: 2 } });
  expect("checkHold → allowed, requested, reason", [check.allowed, check.requested, check.reason], [false, 10, "insufficient_credits"]);
}

main().catch((e: unknown) => {
  console.error("check failed:", e);
  process.exitCode = 1;
});

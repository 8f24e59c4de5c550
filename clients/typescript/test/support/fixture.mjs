// Test support: clients of the compiled package (dist/) and the account set-up every scenario of
// clients/testing/scenarios.md starts from.
import { TollgateClient } from "../../dist/index.js";
import { ADMIN_KEY } from "./processes.mjs";

/** Short back-off (scenarios.md: initial ≈ 20 ms, cap ≥ 1 s), 4 attempts. */
export const FAST_RETRY = Object.freeze({ attemptsMax: 4, backoffInitialMs: 20, backoffMaxMs: 2000 });

/** Records what a client reports through its hooks (pass `hooks` as options): retries and answers. */
export function recorder() {
  const retries = [];
  const answers = [];
  return { retries, answers, hooks: { onRetry: (info) => retries.push(info), onAnswer: (info) => answers.push(info) } };
}

/** An admin client of `url` with the fast retry policy; `options` add to or override it. */
export function adminClient(url, options = {}) {
  return new TollgateClient({ baseUrl: url, key: ADMIN_KEY, retry: FAST_RETRY, ...options });
}

/** Creates `accountId` and credits it (reference seed-<accountId>). */
export async function seedAccount(admin, accountId, credits = 10) {
  await admin.createAccount(accountId);
  await admin.credit(accountId, credits, `seed-${accountId}`);
}

/** The account's balances, read from the server. */
export async function balances(admin, accountId) {
  const { available, reserved, used } = await admin.getAccount(accountId);
  return { available, reserved, used };
}

/** The holds of an account, newest first, read from the server. */
export async function holdsOf(admin, accountId) {
  return (await admin.listHolds({ accountId })).holds;
}

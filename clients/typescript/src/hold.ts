// withHold: reserve, run the work, then commit or release — the three-phase hold as one call, so
// that no code path forgets a hold:
//   - `work` returns and did not settle the hold: the whole hold is committed;
//   - `work` settled it (h.commit(n) for part of it, h.release()): nothing more is done;
//   - `work` throws (or its promise rejects) and the hold is not settled: a hold this call made is
//     released with the error's message as the reason, and the error is rethrown unchanged. If that
//     release fails too (the server unreachable), the error is still rethrown and the hold goes back
//     to available when its TTL expires (the server's reaper): credits are never lost, at worst
//     held for the TTL.
// Replays: the server answers 200 instead of 201 when a hold with this requestId existed already
// (h.replayed) — another click, tab or process with the same id made it and may still be working
// under it (or an attempt of this very call whose answer was lost: the two cannot be told apart).
// A replayed hold is never released (the click whose work failed must not take the hold from the
// click still generating); when the work returns, it is committed like any other (the work was done
// under it; the charge is made once, whoever commits first) unless it was committed already when
// the reserve answered; a replayed hold that was released or expired answers that commit with a
// 409 (hold_released…), thrown: the work was not paid for.
// Holds deduplicate the charge, not the work: to run the work once, skip it when h.replayed, or
// submit a job (submitJob), which deduplicates the work itself.
// The reserve runs under the client's retry policy with one request_id for all its attempts; pass
// your own requestId when the caller may run the same work again (after a crash or reload): the
// second reserve then answers the first one's hold instead of reserving twice.
import type { Hold } from "./types.js";

/** The hold calls withHold needs (a TollgateClient). */
export interface HoldOperations {
  reserveWithStatus(
    accountId: string,
    amount: number | { feature: string; quantity?: number },
    options?: { requestId?: string; ttlMs?: number; metadata?: Record<string, unknown> },
  ): Promise<{ hold: Hold; status: number }>;
  commit(holdId: string, amount?: number | { quantity: number }): Promise<Hold>;
  release(holdId: string, reason?: string): Promise<Hold>;
  extend(holdId: string, ttlMs: number): Promise<Hold>;
}

export type HoldWork<T> = (h: HoldHandle) => Promise<T> | T;

/** The hold that withHold's work runs under. */
export class HoldHandle {
  private current: Hold;
  private settledBy: "commit" | "release" | undefined;

  constructor(
    private readonly client: HoldOperations,
    hold: Hold,
    /** True when the reserve was answered 200: a hold with this requestId existed already. */
    readonly replayed: boolean = false,
  ) {
    this.current = hold;
  }

  /** The hold as last answered by the server. */
  get hold(): Hold {
    return this.current;
  }

  get holdId(): string {
    return this.current.hold_id;
  }

  /** Whether the work has committed or released the hold. */
  get settled(): boolean {
    return this.settledBy !== undefined;
  }

  /**
   * Commits `amount` (default: all) — or `{ quantity }` units at the hold's unit_price (a hold
   * reserved by feature); the rest goes back to available.
   */
  async commit(amount?: number | { quantity: number }): Promise<Hold> {
    this.current = await this.client.commit(this.current.hold_id, amount);
    this.settledBy = "commit";
    return this.current;
  }

  /** Gives the whole hold back. */
  async release(reason?: string): Promise<Hold> {
    this.current = await this.client.release(this.current.hold_id, reason);
    this.settledBy = "release";
    return this.current;
  }

  /** Pushes the expiry to now + ttlMs (long work). */
  async extend(ttlMs: number): Promise<Hold> {
    this.current = await this.client.extend(this.current.hold_id, ttlMs);
    return this.current;
  }
}

export async function withHold<T>(
  client: HoldOperations,
  accountId: string,
  amount: number | { feature: string; quantity?: number },
  options: { requestId?: string; ttlMs?: number; metadata?: Record<string, unknown> },
  work: HoldWork<T>,
): Promise<T> {
  const reserved = await client.reserveWithStatus(accountId, amount, options);
  const h = new HoldHandle(client, reserved.hold, reserved.status === 200);
  let result: T;
  try {
    result = await work(h);
  } catch (error) {
    if (!h.settled && !h.replayed) {
      try {
        await h.release(releaseReason(error));
      } catch {
        // The work's error is what the caller must see; the hold expires by its TTL.
      }
    }
    throw error;
  }
  const chargedAlready = h.replayed && reserved.hold.status === "committed";
  if (!h.settled && !chargedAlready) await h.commit();
  return result;
}

// At most 200 characters (the server allows 1024 bytes; a UTF-16 unit is at most 3 bytes).
function releaseReason(error: unknown): string {
  const what = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  return `withHold: the work threw ${what}`.slice(0, 200);
}

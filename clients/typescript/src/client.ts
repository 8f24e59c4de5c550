// TollgateClient: every call of tollgate's HTTP API, typed.
//
// Each method is one call: it checks its arguments (an ArgumentError, nothing sent), sends the
// request under the retry policy (transport.ts) and resolves to the server's JSON as it is (types.ts),
// or rejects with a TollgateError: ProblemError (the server's refusal: code, status, detail),
// TransportError (no answer after the attempts) — see errors.ts.
//
// Ids: reserve and the refunds without a requestId (and submitJob without a clientRequestId) make
// one ONCE per call, so that all its attempts reuse it. A caller that may repeat the call later
// (after a crash, a page reload) should pass its own id — newRequestId() makes one — and keep it.
//
// Works in Node 18+ and browsers (ES module; fetch, AbortController, Web Crypto). From a browser
// kiosk page, serve the page and the API from one origin (e.g. a reverse proxy) and give the page
// an account key, never the admin key.
import { ArgumentError, isRecord } from "./errors.js";
import { withHold as runWithHold } from "./hold.js";
import type { HoldWork } from "./hold.js";
import { encodeComponent, newRequestId, withQuery } from "./ids.js";
import { DEFAULT_RETRY_POLICY, Transport } from "./transport.js";
import type { AnswerInfo, Answer, FetchFunction, Resend, RetryInfo, RetryPolicy } from "./transport.js";
import type {
  Account,
  AccountPage,
  AccountScope,
  AdminScope,
  AuditReport,
  CreatedKey,
  EventPage,
  Health,
  Hold,
  HoldCheck,
  HoldPage,
  HoldStatus,
  IdempotencyKey,
  Job,
  JobHistory,
  JobPage,
  JobStatus,
  KeyInfo,
  KeyPage,
  Lock,
  LockHolder,
  LotCategory,
  LotPage,
  LotStatus,
  Price,
  PricePage,
  PriceVersionPage,
  RateLimitDecision,
  RateLimitReset,
  Readiness,
  RevokedKey,
  Transfer,
  TransferRecord,
  DeletedWebhookEndpoint,
  WebhookDeliveryPage,
  WebhookDeliveryStatus,
  WebhookEndpoint,
  WebhookEndpointPage,
} from "./types.js";
import {
  FINGERPRINT_BYTES_MAX,
  LEASE_MS_MAX,
  PAGE_LIMIT_MAX,
  REASON_BYTES_MAX,
  WAIT_MS_MAX,
  checkAmount,
  checkBoolean,
  checkId,
  checkInteger,
  checkJson,
  checkObject,
  checkOneOf,
  checkOptions,
  checkPathId,
  checkScopes,
  checkServerId,
  checkText,
  checkTime,
} from "./validate.js";

export interface ClientOptions {
  /** "http://host:port" or "https://host[:port][/prefix]" (no query, fragment or user info). */
  baseUrl: string;
  /** Sent as "Authorization: Bearer <key>": the admin key, or an account key (its account only). */
  key?: string;
  /** Each attempt's bound, from sending to the end of the answer. Default 10000. */
  timeoutMs?: number;
  retry?: Partial<RetryPolicy>;
  /** Prefix of the ids the client makes (reserve, submitJob, the refunds). Default "client-". */
  requestIdPrefix?: string;
  /** The fetch to use; default globalThis.fetch. */
  fetch?: FetchFunction;
  /** Called before each resend (for logs, or a kiosk's "still trying…"). */
  onRetry?: (info: RetryInfo) => void;
  /** Called when a call ends with an HTTP answer: its status and how many attempts it took. */
  onAnswer?: (info: AnswerInfo) => void;
}

export interface PageOptions {
  /** 1 to 1000; server default 100. */
  limit?: number;
  /** The id of the last item of the previous page. */
  startingAfter?: string;
}

export interface ReserveOptions {
  /** Every attempt of this call sends it; absent: the client makes one (once per call). */
  requestId?: string;
  /** Server default hold_ttl_ms (5 minutes), bounded by its hold_ttl_max_ms. */
  ttlMs?: number;
  metadata?: Record<string, unknown>;
}

/**
 * A reservation (or its check) by feature instead of an amount (api.md, Prices): quantity × the
 * feature's current price, computed by the server when it reserves.
 */
export interface FeatureQuantity {
  /** A feature that has a price (setPrice). */
  feature: string;
  /** 1 to 2^53 − 1; absent: 1. */
  quantity?: number;
}

// What a reservation (or its check) holds: {amount}, or {feature, quantity?} — `amount` is a number
// or a FeatureQuantity.
function amountOrFeature(amount: number | FeatureQuantity, field: string): Record<string, unknown> {
  if (!isRecord(amount)) return { amount: checkAmount(amount, field) };
  const o = checkOptions(amount, field, ["feature", "quantity"]);
  const body: Record<string, unknown> = { feature: checkId(o.feature, "feature") };
  if (o.quantity !== undefined) body["quantity"] = checkAmount(o.quantity, "quantity");
  return body;
}

/** A new key's options (all optional): what it may do, until when, and a name for lists. */
export interface CreateKeyOptions {
  /** holds:write, jobs:write, read (no duplicates); absent: all three. */
  scopes?: AccountScope[];
  /** RFC 3339 (or a Date) in the future; after it the key answers 401. Absent: never expires. */
  expiresAt?: string | Date;
  /** 1-100 bytes, shown in key lists. */
  name?: string;
}

const ACCOUNT_SCOPES: readonly AccountScope[] = ["holds:write", "jobs:write", "read"];
const ADMIN_SCOPES: readonly AdminScope[] = ["admin", "admin:read"];
const KEY_NAME_BYTES_MAX = 100;

// The body of a key's creation: only what is given.
function keyBody(options: Omit<CreateKeyOptions, "scopes"> | undefined, known: string[]): Record<string, unknown> {
  const o = checkOptions(options, "options", known);
  const body: Record<string, unknown> = {};
  if (o.expiresAt !== undefined) body.expires_at = checkTime(o.expiresAt, "expiresAt");
  if (o.name !== undefined) body.name = checkText(o.name, "name", KEY_NAME_BYTES_MAX, 1);
  return body;
}

/** A credit's lot (api.md, Credit lots); absent fields take the server's defaults. */
export interface CreditOptions {
  /** RFC 3339 (or a Date) in the future: the lot's unspent credits expire then. Absent: never. */
  expiresAt?: string | Date;
  /** 0 to 100, lower spent first; absent: 50. */
  priority?: number;
  /** Absent: "paid". */
  category?: LotCategory;
}

const LOT_PRIORITY_MAX = 100;
const LOT_CATEGORIES: readonly LotCategory[] = ["paid", "promotional"];
const LOT_STATUSES: readonly LotStatus[] = ["active", "expired", "spent"];

// The body of a credit: the lot's fields only when given.
function creditBody(amount: number, reference: string, options: CreditOptions | undefined): Record<string, unknown> {
  const o = checkOptions(options, "options", ["expiresAt", "priority", "category"]);
  const body: Record<string, unknown> = { amount: checkAmount(amount, "amount"), reference: checkId(reference, "reference") };
  if (o.expiresAt !== undefined) body.expires_at = checkTime(o.expiresAt, "expiresAt");
  if (o.priority !== undefined) body.priority = checkInteger(o.priority, "priority", 0, LOT_PRIORITY_MAX);
  if (o.category !== undefined) body.category = checkOneOf(o.category, "category", LOT_CATEGORIES);
  return body;
}

export interface RefundOptions {
  /** Why the credits are given back (required, 1-1024 bytes): kept on the refunded event. */
  reason: string;
  /** Absent: everything the hold charged and has not given back yet. */
  amount?: number;
  /** Every attempt of this call sends it; absent: the client makes one (once per call). */
  requestId?: string;
}

export interface SubmitJobOptions {
  /** Absent: the client makes one (once per call). */
  clientRequestId?: string;
  accountId: string;
  cost: number;
  /** A provider named in the server's configuration. */
  provider: string;
  /** Any JSON value: what the provider is sent. */
  input: unknown;
}

const PAGE_KEYS = ["limit", "startingAfter"] as const;
const HOLD_STATUSES: readonly HoldStatus[] = ["active", "committed", "released", "expired"];
const JOB_STATUSES: readonly JobStatus[] = ["pending", "running", "completed", "failed", "cancelled"];
const DELIVERY_STATUSES: readonly WebhookDeliveryStatus[] = ["pending", "delivered", "failed"];
const CLIENT_OPTION_KEYS = ["baseUrl", "key", "timeoutMs", "retry", "requestIdPrefix", "fetch", "onRetry", "onAnswer"];
const RETRY_KEYS = ["budgetMs", "attemptsMax", "backoffInitialMs", "backoffMaxMs", "retryInsufficientCreditsOnce"];

// The client's policy with `changes` (options.retry, or withRetry's), checked.
function retryPolicy(base: RetryPolicy, changes: Partial<RetryPolicy> | undefined, field: string): RetryPolicy {
  const retry: RetryPolicy = { ...base, ...checkOptions(changes, field, RETRY_KEYS) };
  checkInteger(retry.budgetMs, `${field}.budgetMs`, 0, 3_600_000);
  checkInteger(retry.attemptsMax, `${field}.attemptsMax`, 1, 1000);
  checkInteger(retry.backoffInitialMs, `${field}.backoffInitialMs`, 0, 3_600_000);
  checkInteger(retry.backoffMaxMs, `${field}.backoffMaxMs`, retry.backoffInitialMs, 3_600_000);
  checkBoolean(retry.retryInsufficientCreditsOnce, `${field}.retryInsufficientCreditsOnce`);
  return retry;
}

function page(options: PageOptions | undefined, field: string): { limit?: number; starting_after?: string } {
  const o = checkOptions(options, field, PAGE_KEYS);
  const query: { limit?: number; starting_after?: string } = {};
  if (o.limit !== undefined) query.limit = checkInteger(o.limit, `${field}.limit`, 1, PAGE_LIMIT_MAX);
  if (o.startingAfter !== undefined) query.starting_after = checkId(o.startingAfter, `${field}.startingAfter`);
  return query;
}

function checkTtl(value: unknown, field: string): number {
  return checkInteger(value, field, 1, Number.MAX_SAFE_INTEGER);
}

export class TollgateClient {
  private readonly transport: Transport;
  private readonly requestIdPrefix: string;
  /** The policy of this client's calls. */
  readonly retry: Readonly<RetryPolicy>;

  constructor(options: ClientOptions) {
    const o = checkOptions(options, "options", CLIENT_OPTION_KEYS) as Partial<ClientOptions>;
    const baseUrl = normalizeBaseUrl(o.baseUrl);
    const retry = retryPolicy(DEFAULT_RETRY_POLICY, o.retry, "options.retry");
    this.retry = Object.freeze(retry);
    const timeoutMs = o.timeoutMs === undefined ? 10_000 : checkInteger(o.timeoutMs, "options.timeoutMs", 1, 3_600_000);
    if (o.key !== undefined) checkText(o.key, "options.key", 1024, 1);
    this.requestIdPrefix = o.requestIdPrefix ?? "client-";
    // The prefix and 16 hex digits must make an id.
    checkId(this.requestIdPrefix + "0".repeat(16), "options.requestIdPrefix");
    const fetchFunction: FetchFunction | undefined = o.fetch ?? globalThis.fetch;
    if (typeof fetchFunction !== "function") {
      throw new ArgumentError("options.fetch", "no fetch: this platform has none (Node 18+ and browsers do); pass options.fetch");
    }
    for (const hook of ["onRetry", "onAnswer"] as const) {
      if (o[hook] !== undefined && typeof o[hook] !== "function") {
        throw new ArgumentError(`options.${hook}`, `options.${hook} must be a function`);
      }
    }
    this.transport = new Transport({
      baseUrl,
      key: o.key,
      timeoutMs,
      retry,
      // Called as a plain function: a browser's fetch refuses any other `this` ("Illegal invocation").
      fetch: (input, init) => fetchFunction(input, init),
      onRetry: o.onRetry,
      onAnswer: o.onAnswer,
    });
  }

  /**
   * This client (the same connection pool, hooks and key) with another retry policy for the calls
   * made through it: `client.withRetry({ budgetMs: 2000 }).reserve(...)`. The changes are checked
   * like options.retry; this client's own policy is unchanged.
   */
  withRetry(changes: Partial<RetryPolicy>): TollgateClient {
    const retry = Object.freeze(retryPolicy(this.retry, changes, "changes"));
    return Object.assign(Object.create(TollgateClient.prototype) as TollgateClient, this, { retry });
  }

  /** A fresh id for reserve, submitJob or a refund: this client's prefix and 16 random hex digits. */
  newRequestId(): string {
    return newRequestId(this.requestIdPrefix);
  }

  // --- accounts and credits (admin key; getAccount and events also with the account's key)

  /** 201 the new account; the same settings again: the account as it is (no error). */
  async createAccount(accountId: string, options?: { overdraftLimit?: number; maxActiveHolds?: number }): Promise<Account> {
    const o = checkOptions(options, "options", ["overdraftLimit", "maxActiveHolds"]);
    const body: Record<string, unknown> = { account_id: checkId(accountId, "accountId") };
    if (o.overdraftLimit !== undefined) body["overdraft_limit"] = checkInteger(o.overdraftLimit, "overdraftLimit", 0, Number.MAX_SAFE_INTEGER);
    if (o.maxActiveHolds !== undefined) body["max_active_holds"] = checkInteger(o.maxActiveHolds, "maxActiveHolds", 1, 1_000_000_000);
    return this.json<Account>({ method: "POST", path: "/v1/accounts", body, resend: "safe" });
  }

  async getAccount(accountId: string): Promise<Account> {
    return this.json<Account>({ method: "GET", path: accountPath(accountId), resend: "safe" });
  }

  /** By account_id ascending (admin). */
  async listAccounts(options?: PageOptions): Promise<AccountPage> {
    return this.json<AccountPage>({ method: "GET", path: withQuery("/v1/accounts", page(options, "options")), resend: "safe" });
  }

  /**
   * Changes only the settings given (admin); maxActiveHolds null removes the limit; a frozen account
   * refuses new holds, jobs and debits (409 account_frozen); lowBalanceThreshold turns on balance
   * notices (null turns them off). Absolute values: safe to resend.
   */
  async updateAccount(
    accountId: string,
    settings: { overdraftLimit?: number; maxActiveHolds?: number | null; frozen?: boolean; lowBalanceThreshold?: number | null },
  ): Promise<Account> {
    const path = accountPath(accountId);
    const o = checkOptions(settings, "settings", ["overdraftLimit", "maxActiveHolds", "frozen", "lowBalanceThreshold"]);
    const body: Record<string, unknown> = {};
    if (o.overdraftLimit !== undefined) body["overdraft_limit"] = checkInteger(o.overdraftLimit, "overdraftLimit", 0, Number.MAX_SAFE_INTEGER);
    if (o.maxActiveHolds !== undefined) {
      body["max_active_holds"] = o.maxActiveHolds === null ? null : checkInteger(o.maxActiveHolds, "maxActiveHolds", 1, 1_000_000_000);
    }
    if (o.frozen !== undefined) body["frozen"] = checkBoolean(o.frozen, "frozen");
    if (o.lowBalanceThreshold !== undefined) {
      body["low_balance_threshold"] =
        o.lowBalanceThreshold === null ? null : checkInteger(o.lowBalanceThreshold, "lowBalanceThreshold", 1, Number.MAX_SAFE_INTEGER);
    }
    return this.json<Account>({ method: "PATCH", path, body, resend: "safe" });
  }

  /**
   * Adds purchased credits as a new lot (event.lot_id) with the options' expiry, priority and
   * category; the same reference again adds nothing (and answers the first, whatever its options).
   */
  async credit(accountId: string, amount: number, reference: string, options?: CreditOptions): Promise<Transfer> {
    const path = `${accountPath(accountId)}/credits`;
    return this.json<Transfer>({ method: "POST", path, body: creditBody(amount, reference, options), resend: "safe" });
  }

  /** The account's credit lots in spending order (scope read); status: only those. */
  async listLots(accountId: string, options?: PageOptions & { status?: LotStatus }): Promise<LotPage> {
    const path = `${accountPath(accountId)}/lots`;
    const o = checkOptions(options, "options", [...PAGE_KEYS, "status"]);
    const { status, ...paging } = o;
    const query = {
      status: status === undefined ? undefined : checkOneOf(status, "status", LOT_STATUSES),
      ...page(paging, "options"),
    };
    return this.json<LotPage>({ method: "GET", path: withQuery(path, query), resend: "safe" });
  }

  /** Removes available credits (refund, correction); 409 insufficient_credits if not available. */
  async debit(accountId: string, amount: number, reference: string, reason: string): Promise<Transfer> {
    const path = `${accountPath(accountId)}/debits`;
    const body = {
      amount: checkAmount(amount, "amount"),
      reference: checkId(reference, "reference"),
      reason: checkText(reason, "reason", REASON_BYTES_MAX),
    };
    return this.json<Transfer>({ method: "POST", path, body, resend: "safe" });
  }

  /** The account's events, oldest first; continue with next_after. */
  async events(accountId: string, options?: { after?: number; limit?: number }): Promise<EventPage> {
    const path = `${accountPath(accountId)}/events`;
    const o = checkOptions(options, "options", ["after", "limit"]);
    const query = {
      after: checkInteger(o.after ?? 0, "after", 0, Number.MAX_SAFE_INTEGER),
      limit: o.limit === undefined ? undefined : checkInteger(o.limit, "limit", 1, PAGE_LIMIT_MAX),
    };
    return this.json<EventPage>({ method: "GET", path: withQuery(path, query), resend: "safe" });
  }

  /**
   * Every account's events in commit order (admin): store next_after and pass it as `after`. With
   * waitMs an empty answer waits until something new is durable (the time-out grows by waitMs).
   */
  async feed(options?: { after?: number; limit?: number; waitMs?: number }): Promise<EventPage> {
    const o = checkOptions(options, "options", ["after", "limit", "waitMs"]);
    const query = {
      after: checkInteger(o.after ?? 0, "after", 0, Number.MAX_SAFE_INTEGER),
      limit: o.limit === undefined ? undefined : checkInteger(o.limit, "limit", 1, PAGE_LIMIT_MAX),
      wait_ms: o.waitMs === undefined ? undefined : checkInteger(o.waitMs, "waitMs", 0, WAIT_MS_MAX),
    };
    return this.json<EventPage>({
      method: "GET",
      path: withQuery("/v1/events", query),
      resend: "safe",
      extraTimeoutMs: query.wait_ms ?? 0,
    });
  }

  /** The credit or debit recorded under `reference` (a lost answer: look instead of re-posting). */
  async getTransfer(reference: string): Promise<TransferRecord> {
    const path = `/v1/transfers/${encodeComponent(checkPathId(reference, "reference"))}`;
    return this.json<TransferRecord>({ method: "GET", path, resend: "safe" });
  }

  // --- webhook endpoints (admin key)

  /**
   * Registers an endpoint, enabled; its secret is shown only here. eventTypes / accountId left out:
   * every type, every account. Not resent once it may have arrived (each call makes one).
   */
  async createWebhookEndpoint(
    url: string,
    options?: { eventTypes?: string[]; accountId?: string; description?: string },
  ): Promise<WebhookEndpoint> {
    const o = checkOptions(options, "options", ["eventTypes", "accountId", "description"]);
    const body: Record<string, unknown> = { url: checkText(url, "url", WEBHOOK_URL_BYTES_MAX, 1) };
    if (o.eventTypes !== undefined) body["event_types"] = checkEventTypes(o.eventTypes);
    if (o.accountId !== undefined) body["account_id"] = checkId(o.accountId, "accountId");
    if (o.description !== undefined) body["description"] = checkText(o.description, "description", REASON_BYTES_MAX);
    return this.json<WebhookEndpoint>({ method: "POST", path: "/v1/webhook-endpoints", body, resend: "only_if_unsent" });
  }

  /** In the order they were made, never secrets. */
  async listWebhookEndpoints(options?: PageOptions): Promise<WebhookEndpointPage> {
    const query = page(options, "options");
    return this.json<WebhookEndpointPage>({ method: "GET", path: withQuery("/v1/webhook-endpoints", query), resend: "safe" });
  }

  async getWebhookEndpoint(endpointId: string): Promise<WebhookEndpoint> {
    return this.json<WebhookEndpoint>({ method: "GET", path: endpointPath(endpointId), resend: "safe" });
  }

  /** Changes only what is given (absolute values: safe to resend); eventTypes null: every type again. */
  async updateWebhookEndpoint(
    endpointId: string,
    changes: { url?: string; eventTypes?: string[] | null; description?: string; status?: "enabled" | "disabled" },
  ): Promise<WebhookEndpoint> {
    const o = checkOptions(changes, "changes", ["url", "eventTypes", "description", "status"]);
    const body: Record<string, unknown> = {};
    if (o.url !== undefined) body["url"] = checkText(o.url, "url", WEBHOOK_URL_BYTES_MAX, 1);
    if (o.eventTypes !== undefined) body["event_types"] = o.eventTypes === null ? null : checkEventTypes(o.eventTypes);
    if (o.description !== undefined) body["description"] = checkText(o.description, "description", REASON_BYTES_MAX);
    if (o.status !== undefined) body["status"] = checkOneOf(o.status, "status", ["enabled", "disabled"] as const);
    return this.json<WebhookEndpoint>({ method: "PATCH", path: endpointPath(endpointId), body, resend: "safe" });
  }

  /** A resend after a lost answer is 404: it was deleted. */
  async deleteWebhookEndpoint(endpointId: string): Promise<DeletedWebhookEndpoint> {
    return this.json<DeletedWebhookEndpoint>({ method: "DELETE", path: endpointPath(endpointId), resend: "safe" });
  }

  /** A new secret (shown only here); the old one signs beside it for 24 h. Not resent once it may have arrived. */
  async rotateWebhookSecret(endpointId: string): Promise<WebhookEndpoint> {
    const path = `${endpointPath(endpointId)}/rotate-secret`;
    return this.json<WebhookEndpoint>({ method: "POST", path, body: {}, resend: "only_if_unsent" });
  }

  /** Each event's delivery to the endpoint, newest event first; startingAfter: a delivery's webhook_id. */
  async listWebhookDeliveries(
    endpointId: string,
    options?: PageOptions & { status?: WebhookDeliveryStatus },
  ): Promise<WebhookDeliveryPage> {
    const o = checkOptions(options, "options", [...PAGE_KEYS, "status"]);
    const { status, ...paging } = o;
    const query = {
      status: status === undefined ? undefined : checkOneOf(status, "status", DELIVERY_STATUSES),
      ...page(paging, "options"),
    };
    const path = withQuery(`${endpointPath(endpointId)}/deliveries`, query);
    return this.json<WebhookDeliveryPage>({ method: "GET", path, resend: "safe" });
  }

  /**
   * Sends again every event after the feed cursor `after` (0: the whole feed) that the endpoint
   * wants, each with its webhook-id unchanged; answers the endpoint (202). Resent after a lost
   * answer: the cursor only moves back, and the receiver deduplicates by webhook-id.
   */
  async replayWebhookEndpoint(endpointId: string, after: number): Promise<WebhookEndpoint> {
    const body = { after: checkInteger(after, "after", 0, Number.MAX_SAFE_INTEGER) };
    return this.json<WebhookEndpoint>({ method: "POST", path: `${endpointPath(endpointId)}/replay`, body, resend: "safe" });
  }

  // --- keys (admin key)

  /**
   * A new account key; its secret is shown only here. `scopes` (holds:write, jobs:write, read;
   * absent: all three), `expiresAt`, `name`. Not resent once it may have arrived.
   */
  async createKey(accountId: string, options?: CreateKeyOptions): Promise<CreatedKey> {
    const path = `${accountPath(accountId)}/keys`;
    const body = keyBody(options, ["scopes", "expiresAt", "name"]);
    if (options?.scopes !== undefined) body.scopes = checkScopes(options.scopes, "scopes", ACCOUNT_SCOPES);
    return this.json<CreatedKey>({ method: "POST", path, body, resend: "only_if_unsent" });
  }

  /**
   * A new admin key (POST /v1/keys, admin scope): "admin" (everything) or "admin:read" (every read,
   * no change at all); its account_id is null. Not resent once it may have arrived.
   */
  async createAdminKey(scope: AdminScope, options?: Omit<CreateKeyOptions, "scopes">): Promise<CreatedKey> {
    const body = { scopes: [checkOneOf(scope, "scope", ADMIN_SCOPES)], ...keyBody(options, ["expiresAt", "name"]) };
    return this.json<CreatedKey>({ method: "POST", path: "/v1/keys", body, resend: "only_if_unsent" });
  }

  /** The key this client calls with (GET /v1/key, any valid key): id, account, scopes, name, expiry. */
  async whoami(): Promise<KeyInfo> {
    return this.json<KeyInfo>({ method: "GET", path: "/v1/key", resend: "safe" });
  }

  async revokeKey(keyId: string): Promise<RevokedKey> {
    const path = `/v1/keys/${encodeComponent(checkServerId(keyId, "keyId"))}`;
    return this.json<RevokedKey>({ method: "DELETE", path, resend: "safe" });
  }

  /** Newest first, never secrets. */
  async listKeys(options?: PageOptions & { accountId?: string }): Promise<KeyPage> {
    const o = checkOptions(options, "options", [...PAGE_KEYS, "accountId"]);
    const { accountId, ...paging } = o;
    const query = {
      account_id: accountId === undefined ? undefined : checkId(accountId, "accountId"),
      ...page(paging, "options"),
    };
    return this.json<KeyPage>({ method: "GET", path: withQuery("/v1/keys", query), resend: "safe" });
  }

  // --- holds

  /**
   * Moves `amount` from available to reserved — or, given `{ feature, quantity? }` instead of a
   * number, quantity (default 1) × the feature's current price; the hold then keeps feature,
   * quantity, unit_price and price_version. The same requestId again answers that hold as it is
   * now; 409 insufficient_credits is asked once more at once, then thrown (its detail is showable).
   */
  async reserve(accountId: string, amount: number | FeatureQuantity, options?: ReserveOptions): Promise<Hold> {
    return (await this.reserveWithStatus(accountId, amount, options)).hold;
  }

  /**
   * reserve, with the answer's status: 201 this call made the hold; 200 a hold with this requestId
   * existed already — a replay (another click or process with the same id made it, or an attempt
   * of this very call whose answer was lost: the two cannot be told apart).
   */
  async reserveWithStatus(
    accountId: string,
    amount: number | FeatureQuantity,
    options?: ReserveOptions,
  ): Promise<{ hold: Hold; status: number }> {
    const o = checkOptions(options, "options", ["requestId", "ttlMs", "metadata"]);
    const body: Record<string, unknown> = {
      account_id: checkId(accountId, "accountId"),
      ...amountOrFeature(amount, "amount"),
      // One request_id per logical call: every attempt sends this same body.
      request_id: o.requestId === undefined ? this.newRequestId() : checkId(o.requestId, "requestId"),
    };
    if (o.ttlMs !== undefined) body["ttl_ms"] = checkTtl(o.ttlMs, "ttlMs");
    if (o.metadata !== undefined) body["metadata"] = checkObject(o.metadata, "metadata");
    const answer = await this.transport.send({
      method: "POST", path: "/v1/holds", body, resend: "safe", retryInsufficientCredits: true, retry: this.retry,
    });
    return { hold: answer.body as Hold, status: answer.status };
  }

  /**
   * Moves `amount` (default: all) of the hold to used; the rest goes back. Again: nothing more moves.
   * `{ quantity }` instead of a number (a hold reserved by feature): quantity × the hold's
   * unit_price, the price it was reserved at.
   */
  async commit(holdId: string, amount?: number | { quantity: number }): Promise<Hold> {
    const path = `${holdPath(holdId)}/commit`;
    let body: Record<string, unknown> = {};
    if (isRecord(amount)) {
      body = { quantity: checkAmount(checkOptions(amount, "amount", ["quantity"]).quantity, "quantity") };
    } else if (amount !== undefined) {
      body = { amount: checkAmount(amount, "amount") };
    }
    return this.json<Hold>({ method: "POST", path, body, resend: "safe" });
  }

  /**
   * The decision a reservation of `amount` (or `{ feature, quantity? }`) would meet now, without
   * making it (scope read): allowed, and when not, reason (the code a reserve would throw) and
   * detail. Writes nothing, so it is resent like a read; a refusal is an answer, not an error. It
   * promises nothing: the reservation decides.
   */
  async checkHold(accountId: string, amount: number | FeatureQuantity): Promise<HoldCheck> {
    const body = { account_id: checkId(accountId, "accountId"), ...amountOrFeature(amount, "amount") };
    return this.json<HoldCheck>({ method: "POST", path: "/v1/holds/check", body, resend: "safe" });
  }

  /** Returns the whole hold to available; `reason` is kept on the hold and its event. */
  async release(holdId: string, reason?: string): Promise<Hold> {
    const path = `${holdPath(holdId)}/release`;
    const body = reason === undefined ? {} : { reason: checkText(reason, "reason", REASON_BYTES_MAX) };
    return this.json<Hold>({ method: "POST", path, body, resend: "safe" });
  }

  /** Pushes the expiry to now + ttlMs. No id makes a second send a replay: resent only if it never arrived. */
  async extend(holdId: string, ttlMs: number): Promise<Hold> {
    const path = `${holdPath(holdId)}/extend`;
    return this.json<Hold>({ method: "POST", path, body: { ttl_ms: checkTtl(ttlMs, "ttlMs") }, resend: "only_if_unsent" });
  }

  async getHold(holdId: string): Promise<Hold> {
    return this.json<Hold>({ method: "GET", path: holdPath(holdId), resend: "safe" });
  }

  /** Newest first; requestId finds the hold of a request whose answer was lost. */
  async listHolds(options?: PageOptions & { accountId?: string; status?: HoldStatus; requestId?: string }): Promise<HoldPage> {
    const o = checkOptions(options, "options", [...PAGE_KEYS, "accountId", "status", "requestId"]);
    const { accountId, status, requestId, ...paging } = o;
    const query = {
      account_id: accountId === undefined ? undefined : checkId(accountId, "accountId"),
      status: status === undefined ? undefined : checkOneOf(status, "status", HOLD_STATUSES),
      request_id: requestId === undefined ? undefined : checkId(requestId, "requestId"),
      ...page(paging, "options"),
    };
    return this.json<HoldPage>({ method: "GET", path: withQuery("/v1/holds", query), resend: "safe" });
  }

  /**
   * Gives back `amount` (default: everything it charged and has not given back) of a charged hold
   * (committed, or late-charged) from used to available (admin); the hold's refunded_amount is what
   * it gave back in all. One requestId per call, sent on every attempt: the same id again moves
   * nothing. 409 refund_exceeds_charge for more than is left; 409 conflict when the hold charged
   * nothing or is a job's (refundJob); 422 idempotency_mismatch for the id with another hold or amount.
   */
  async refundHold(holdId: string, options: RefundOptions): Promise<Hold> {
    const path = `${holdPath(holdId)}/refund`;
    return this.json<Hold>({ method: "POST", path, body: refundBody(options, () => this.newRequestId()), resend: "safe" });
  }

  /**
   * Reserves, runs `work` with the hold, then settles it: committed in full when `work` returns
   * without settling it itself (h.commit(n) commits part, h.release() gives it all back), released
   * when `work` throws (the error is then rethrown as it was). Resolves to what `work` returned.
   * If the release itself fails (the server unreachable), the hold goes back when its TTL expires.
   * A replayed reserve (h.replayed: another caller with this requestId made the hold) is never
   * released — see hold.ts.
   */
  async withHold<T>(accountId: string, amount: number | FeatureQuantity, options: ReserveOptions, work: HoldWork<T>): Promise<T> {
    if (typeof work !== "function") throw new ArgumentError("work", "work must be a function (async h => …)");
    return runWithHold(this, accountId, amount, options, work);
  }

  // --- prices (admin key; the reads also admin:read)

  /**
   * What one unit of `feature` costs, in credits (1 to 2^53 − 1): another price than the current one
   * makes the next version (201), the same one changes nothing (200) — safe to resend. Holds
   * already reserved keep the price they were reserved at.
   */
  async setPrice(feature: string, creditsPerUnit: number): Promise<Price> {
    const body = { credits_per_unit: checkAmount(creditsPerUnit, "creditsPerUnit") };
    return this.json<Price>({ method: "PUT", path: pricePath(feature), body, resend: "safe" });
  }

  /** The feature's current price; 404 not_found when it has none. */
  async getPrice(feature: string): Promise<Price> {
    return this.json<Price>({ method: "GET", path: pricePath(feature), resend: "safe" });
  }

  /** Every feature's current price, by feature ascending; startingAfter: the last one's feature. */
  async listPrices(options?: PageOptions): Promise<PricePage> {
    return this.json<PricePage>({ method: "GET", path: withQuery("/v1/prices", page(options, "options")), resend: "safe" });
  }

  /** The feature's prices, newest version first; startingAfter: the last one's version. 404 when it has no price. */
  async listPriceVersions(feature: string, options?: { limit?: number; startingAfter?: number }): Promise<PriceVersionPage> {
    const o = checkOptions(options, "options", PAGE_KEYS);
    const query = {
      limit: o.limit === undefined ? undefined : checkInteger(o.limit, "options.limit", 1, PAGE_LIMIT_MAX),
      starting_after: o.startingAfter === undefined ? undefined : checkInteger(o.startingAfter, "options.startingAfter", 1, Number.MAX_SAFE_INTEGER),
    };
    return this.json<PriceVersionPage>({ method: "GET", path: withQuery(`${pricePath(feature)}/versions`, query), resend: "safe" });
  }

  // --- jobs: every job call is idempotent by its client_request_id, so each is resent like holds

  /** 202 the new job (pending); the same id again: the job as it is now. */
  async submitJob(job: SubmitJobOptions): Promise<Job> {
    const o = checkOptions(job, "job", ["clientRequestId", "accountId", "cost", "provider", "input"]);
    const body = {
      client_request_id: o.clientRequestId === undefined ? this.newRequestId() : checkId(o.clientRequestId, "clientRequestId"),
      account_id: checkId(o.accountId, "accountId"),
      cost: checkAmount(o.cost, "cost"),
      provider: checkId(o.provider, "provider"),
      input: checkJson(o.input, "input"),
    };
    return this.json<Job>({ method: "POST", path: "/v1/jobs", body, resend: "safe" });
  }

  /** With waitMs (0–60000) the server answers as soon as the job ends or the wait is over. */
  async getJob(clientRequestId: string, options?: { waitMs?: number }): Promise<Job> {
    const o = checkOptions(options, "options", ["waitMs"]);
    const waitMs = o.waitMs === undefined ? undefined : checkInteger(o.waitMs, "waitMs", 0, WAIT_MS_MAX);
    const path = withQuery(jobPath(clientRequestId), { wait_ms: waitMs });
    return this.json<Job>({ method: "GET", path, resend: "safe", extraTimeoutMs: waitMs ?? 0 });
  }

  /** The job, cancelled (its hold released) — or its end state if it had already ended. */
  async cancelJob(clientRequestId: string): Promise<Job> {
    return this.json<Job>({ method: "POST", path: `${jobPath(clientRequestId)}/cancel`, body: {}, resend: "safe" });
  }

  /** refundHold for a completed job's hold: the job with its refunded_amount; 409 conflict if it did not complete. */
  async refundJob(clientRequestId: string, options: RefundOptions): Promise<Job> {
    const path = `${jobPath(clientRequestId)}/refund`;
    return this.json<Job>({ method: "POST", path, body: refundBody(options, () => this.newRequestId()), resend: "safe" });
  }

  async listJobs(options?: PageOptions & { accountId?: string; status?: JobStatus }): Promise<JobPage> {
    const o = checkOptions(options, "options", [...PAGE_KEYS, "accountId", "status"]);
    const { accountId, status, ...paging } = o;
    const query = {
      account_id: accountId === undefined ? undefined : checkId(accountId, "accountId"),
      status: status === undefined ? undefined : checkOneOf(status, "status", JOB_STATUSES),
      ...page(paging, "options"),
    };
    return this.json<JobPage>({ method: "GET", path: withQuery("/v1/jobs", query), resend: "safe" });
  }

  /** The job's story, oldest first. */
  async jobHistory(clientRequestId: string): Promise<JobHistory> {
    return this.json<JobHistory>({ method: "GET", path: `${jobPath(clientRequestId)}/history`, resend: "safe" });
  }

  // --- locks (admin key): `fence` strictly increases each time the key changes hands

  /** Held by another owner: 409 lock_held (expiresAt). The same owner again: the same fence. */
  async acquireLock(key: string, owner: string, ttlMs: number): Promise<Lock> {
    const body = { owner: checkId(owner, "owner"), ttl_ms: checkInteger(ttlMs, "ttlMs", 1, LEASE_MS_MAX) };
    return this.json<Lock>({ method: "POST", path: lockPath(key, "/acquire"), body, resend: "safe" });
  }

  /** 409 lock_lost: not the holder any more; 409 lock_cancelled: stop (the lock is freed). */
  async renewLock(holder: LockHolder, ttlMs: number): Promise<Lock> {
    const body = { ...holderBody(holder), ttl_ms: checkInteger(ttlMs, "ttlMs", 1, LEASE_MS_MAX) };
    return this.json<Lock>({ method: "POST", path: lockPath(holder.key, "/renew"), body, resend: "safe" });
  }

  async releaseLock(holder: LockHolder): Promise<Lock> {
    const body = holderBody(holder);
    return this.json<Lock>({ method: "POST", path: lockPath(holder.key, "/release"), body, resend: "safe" });
  }

  /** Asks the holder to stop: its next renew answers lock_cancelled. */
  async cancelLock(key: string): Promise<Lock> {
    return this.json<Lock>({ method: "POST", path: lockPath(key, "/cancel"), body: {}, resend: "safe" });
  }

  async getLock(key: string): Promise<Lock> {
    return this.json<Lock>({ method: "GET", path: lockPath(key, ""), resend: "safe" });
  }

  // --- idempotency keys for the caller's own side effects (admin key)

  /**
   * 201 state "started": go ahead, then finish or abandon. 200 state "finished": use `response`, do
   * not do it again. 409 in_progress. Not resent once it may have arrived (a second begin of the
   * claim the first made answers in_progress).
   */
  async beginIdempotency(key: string, fingerprint: string, ttlMs: number): Promise<IdempotencyKey> {
    const body = { fingerprint: checkFingerprint(fingerprint), ttl_ms: checkInteger(ttlMs, "ttlMs", 1, LEASE_MS_MAX) };
    return this.json<IdempotencyKey>({ method: "POST", path: idempotencyPath(key, "begin"), body, resend: "only_if_unsent" });
  }

  /** Stores `response` (any JSON but null) to replay to every later begin. */
  async finishIdempotency(key: string, fingerprint: string, response: unknown, options?: { attempt?: number }): Promise<IdempotencyKey> {
    const o = checkOptions(options, "options", ["attempt"]);
    if (response === null) throw new ArgumentError("response", "response must be a JSON value other than null");
    const body: Record<string, unknown> = { fingerprint: checkFingerprint(fingerprint), response: checkJson(response, "response") };
    if (o.attempt !== undefined) body["attempt"] = checkInteger(o.attempt, "attempt", 1, Number.MAX_SAFE_INTEGER);
    return this.json<IdempotencyKey>({ method: "POST", path: idempotencyPath(key, "finish"), body, resend: "safe" });
  }

  /** Gives the claim back after a failure that did nothing. */
  async abandonIdempotency(key: string, fingerprint: string, options?: { attempt?: number }): Promise<IdempotencyKey> {
    const o = checkOptions(options, "options", ["attempt"]);
    const body: Record<string, unknown> = { fingerprint: checkFingerprint(fingerprint) };
    if (o.attempt !== undefined) body["attempt"] = checkInteger(o.attempt, "attempt", 1, Number.MAX_SAFE_INTEGER);
    return this.json<IdempotencyKey>({ method: "POST", path: idempotencyPath(key, "abandon"), body, resend: "safe" });
  }

  // --- rate limits (admin key)

  /** Counts one attempt: allowed, or 429 rate_limited (retryAfterMs). Not resent once it may have arrived. */
  async checkRatelimit(policy: string, key: string, options?: { cost?: number }): Promise<RateLimitDecision> {
    const o = checkOptions(options, "options", ["cost"]);
    const body: Record<string, unknown> = { key: checkId(key, "key") };
    if (o.cost !== undefined) body["cost"] = checkAmount(o.cost, "cost");
    return this.json<RateLimitDecision>({ method: "POST", path: ratelimitPath(policy, "check"), body, resend: "only_if_unsent" });
  }

  /** The key has its full budget again (e.g. after a good login). */
  async resetRatelimit(policy: string, key: string): Promise<RateLimitReset> {
    const body = { key: checkId(key, "key") };
    return this.json<RateLimitReset>({ method: "POST", path: ratelimitPath(policy, "reset"), body, resend: "safe" });
  }

  // --- operations

  /** Recomputes balances from the event log (admin). */
  async audit(options?: { accountId?: string }): Promise<AuditReport> {
    const o = checkOptions(options, "options", ["accountId"]);
    const query = { account_id: o.accountId === undefined ? undefined : checkId(o.accountId, "accountId") };
    return this.json<AuditReport>({ method: "GET", path: withQuery("/v1/audit", query), resend: "safe" });
  }

  async healthz(): Promise<Health> {
    return this.json<Health>({ method: "GET", path: "/healthz", resend: "safe" });
  }

  /** Not ready answers 503, which is retried like any 503 and then thrown. */
  async readyz(): Promise<Readiness> {
    return this.json<Readiness>({ method: "GET", path: "/readyz", resend: "safe" });
  }

  /** Prometheus text. */
  async metrics(): Promise<string> {
    const answer = await this.transport.send({ method: "GET", path: "/metrics", resend: "safe" });
    return String(answer.body);
  }

  /** The OpenAPI 3.1 document the server serves. */
  async openapi(): Promise<Record<string, unknown>> {
    return this.json<Record<string, unknown>>({ method: "GET", path: "/openapi.json", resend: "safe" });
  }

  /**
   * Any other call, with the same time-outs and retry policy: `path` is the path and query, already
   * encoded; `body` is sent as JSON. Resolves to the status, the body and the attempts.
   */
  async call(method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE", path: string, body?: unknown, resend: Resend = "safe"): Promise<Answer> {
    checkOneOf(method, "method", ["GET", "POST", "PUT", "PATCH", "DELETE"]);
    if (typeof path !== "string" || !path.startsWith("/")) throw new ArgumentError("path", "path must start with /");
    checkOneOf(resend, "resend", ["safe", "only_if_unsent"]);
    if (body !== undefined) checkJson(body, "body");
    return this.transport.send({ method, path, body, resend, retry: this.retry });
  }

  private async json<T>(spec: Parameters<Transport["send"]>[0]): Promise<T> {
    const answer = await this.transport.send({ ...spec, retry: this.retry });
    return answer.body as T;
  }
}

/** The holder that an acquireLock or renewLock answer names, to pass to renewLock and releaseLock. */
export function lockHolder(lock: Lock): LockHolder {
  if (lock.owner === null) throw new ArgumentError("lock", `lock ${lock.key} is not held`);
  return { key: lock.key, owner: lock.owner, fence: lock.fence };
}


function normalizeBaseUrl(value: unknown): string {
  if (typeof value !== "string") throw new ArgumentError("options.baseUrl", "options.baseUrl must be a string like http://127.0.0.1:8080");
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ArgumentError("options.baseUrl", `options.baseUrl "${value}" is not an absolute URL like http://127.0.0.1:8080`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new ArgumentError("options.baseUrl", `options.baseUrl "${value}": the scheme must be http or https`);
  }
  if (url.username !== "" || url.password !== "") {
    throw new ArgumentError("options.baseUrl", `options.baseUrl: user info is not supported; pass options.key`);
  }
  if (url.search !== "" || url.hash !== "") {
    throw new ArgumentError("options.baseUrl", `options.baseUrl "${value}": a query or fragment is not supported`);
  }
  return url.origin + url.pathname.replace(/\/+$/, "");
}

function accountPath(accountId: string): string {
  return `/v1/accounts/${encodeComponent(checkPathId(accountId, "accountId"))}`;
}

function pricePath(feature: string): string {
  return `/v1/prices/${encodeComponent(checkPathId(feature, "feature"))}`;
}

function holdPath(holdId: string): string {
  return `/v1/holds/${encodeComponent(checkServerId(holdId, "holdId"))}`;
}

function jobPath(clientRequestId: string): string {
  return `/v1/jobs/${encodeComponent(checkPathId(clientRequestId, "clientRequestId"))}`;
}

function lockPath(key: string, action: "" | "/acquire" | "/renew" | "/release" | "/cancel"): string {
  return `/v1/locks/${encodeComponent(checkPathId(key, "key"))}${action}`;
}

function idempotencyPath(key: string, action: "begin" | "finish" | "abandon"): string {
  return `/v1/idempotency/${encodeComponent(checkPathId(key, "key"))}/${action}`;
}

function ratelimitPath(policy: string, action: "check" | "reset"): string {
  return `/v1/ratelimits/${encodeComponent(checkPathId(policy, "policy"))}/${action}`;
}

function holderBody(holder: LockHolder): Record<string, unknown> {
  const o = checkOptions(holder, "holder", ["key", "owner", "fence"]);
  const body: Record<string, unknown> = { owner: checkId(o.owner, "holder.owner") };
  if (o.fence !== undefined) body["fence"] = checkInteger(o.fence, "holder.fence", 1, Number.MAX_SAFE_INTEGER);
  return body;
}

// A refund's body, checked (absent options: reason is missing); `newId` makes the request_id when
// none is given — once per logical call, so every attempt sends this same body.
function refundBody(options: RefundOptions, newId: () => string): Record<string, unknown> {
  const o = checkOptions(options, "options", ["reason", "amount", "requestId"]);
  const body: Record<string, unknown> = {
    reason: checkText(o.reason, "reason", REASON_BYTES_MAX, 1),
    request_id: o.requestId === undefined ? newId() : checkId(o.requestId, "requestId"),
  };
  if (o.amount !== undefined) body["amount"] = checkAmount(o.amount, "amount");
  return body;
}

function checkFingerprint(fingerprint: string): string {
  return checkText(fingerprint, "fingerprint", FINGERPRINT_BYTES_MAX, 1);
}

const WEBHOOK_URL_BYTES_MAX = 2048;

function endpointPath(endpointId: string): string {
  return `/v1/webhook-endpoints/${encodeComponent(checkServerId(endpointId, "endpointId"))}`;
}

/** A list of event type names (the server checks them: unknown, empty or repeated ones are 400). */
function checkEventTypes(value: unknown): string[] {
  if (!Array.isArray(value) || !value.every((t) => typeof t === "string")) {
    throw new ArgumentError("eventTypes", "eventTypes must be an array of event type names");
  }
  return [...(value as string[])];
}

// The JSON shapes tollgate answers with (docs/openapi.json, docs/api.md), unchanged: field
// names stay the server's snake_case. Amounts and balances are integers of credits (at most 2^53 − 1,
// exact in a JS number); times are RFC 3339 UTC strings with milliseconds; durations carry their
// unit in the name.

export type HoldStatus = "active" | "committed" | "released" | "expired";
/** A credit lot's: expired once expires_at has passed, else active while it has credits available or reserved, else spent. */
export type LotStatus = "active" | "expired" | "spent";
export type LotCategory = "paid" | "promotional";
export type JobStatus = "pending" | "running" | "completed" | "failed" | "cancelled";
export type EventType =
  | "credited"
  | "debited"
  | "reserved"
  | "committed"
  | "released"
  | "expired"
  | "late_charged"
  | "late_forgiven"
  | "account_updated"
  | "extended"
  /** Part of a charged hold's charge given back (used → available); reference: the refund's request_id. */
  | "refunded"
  /** Balance notices (api.md "Balance notices"): amount 0, after the movement that crossed. */
  | "balance_low"
  | "balance_depleted"
  | "balance_recovered"
  /** A credit lot's unspent credits moved from available to expired at its expires_at; lot_id names it. */
  | "lot_expired";

/** available + reserved + used + expired == purchased, always. */
export interface Account {
  account_id: string;
  available: number;
  reserved: number;
  used: number;
  /** Credits whose lot ran out unspent (api.md, Credit lots). */
  expired: number;
  purchased: number;
  overdraft_limit: number;
  max_active_holds: number | null;
  frozen: boolean;
  /**
   * Why a frozen account is frozen: "refund shortfall" (a payment's refund took back credits already
   * spent: open again once credits repay it) or "payment disputed" (an admin unfreezes it); null when
   * not frozen or frozen by an admin. Absent from servers older than payments.
   */
  frozen_reason?: string | null;
  /** Balance notices when available crosses it; null: none. */
  low_balance_threshold: number | null;
  active_holds: number;
  oldest_active_hold_age_ms: number | null;
  created_at: string;
}

export interface Hold {
  hold_id: string;
  account_id: string;
  request_id: string;
  amount: number;
  committed_amount: number;
  /** What refunds have given back of committed_amount (never more). */
  refunded_amount: number;
  status: HoldStatus;
  /** A commit after expiry, by the server's late_commit policy. */
  late_outcome?: "charged" | "forgiven";
  created_at: string;
  expires_at: string;
  closed_at?: string;
  release_reason?: string;
  metadata: Record<string, unknown>;
  /**
   * The hold's draw: what it took from each credit lot, in draw order (what came from the overdraft
   * is in no lot, so the sum may be less than amount). Absent from servers older than lots.
   */
  lots?: LotDraw[];
  /**
   * A hold reserved by feature (api.md, Prices): the feature, the units reserved, the price it was
   * reserved at (frozen: a commit by quantity charges quantity × unit_price) and that price's version.
   * Absent on a hold reserved by amount, and from the answers of a commit by amount, a release and an
   * extend (getHold shows them).
   */
  feature?: string;
  quantity?: number;
  unit_price?: number;
  price_version?: number;
}

/** A feature's price (api.md, Prices): what one unit costs, in credits. */
export interface Price {
  feature: string;
  credits_per_unit: number;
  /** 1 for the feature's first price; each change of credits_per_unit makes the next. */
  version: number;
  /** When this version was set. */
  updated_at: string;
}

/** Every feature's current price, by feature ascending. */
export interface PricePage {
  prices: Price[];
  has_more: boolean;
}

/** A feature's prices, newest version first. */
export interface PriceVersionPage {
  versions: Price[];
  has_more: boolean;
}

/** Why a reservation would be refused now: the error code a reserve would answer (409). */
export type HoldCheckReason = "insufficient_credits" | "too_many_holds" | "account_frozen" | "overflow";

/**
 * The decision a reservation would meet now (POST /v1/holds/check; nothing is written). requested:
 * the amount, or quantity × unit_price (then feature, quantity and unit_price are there too).
 */
export interface HoldCheck {
  allowed: boolean;
  account_id: string;
  available: number;
  requested: number;
  feature?: string;
  quantity?: number;
  unit_price?: number;
  /** allowed false: the error code a reservation would be refused with, and its detail. */
  reason?: HoldCheckReason;
  detail?: string;
}

/** What a hold took from one credit lot. */
export interface LotDraw {
  lot_id: string;
  amount: number;
}

/**
 * A credit lot (api.md, Credit lots): the credits of one credit, spent in order — lowest priority,
 * soonest expires_at (none: last), oldest. available + reserved + used + expired == amount.
 */
export interface Lot {
  lot_id: string;
  /** The credit's reference; null for the lot an upgrade made of an account's credits. */
  reference: string | null;
  category: LotCategory;
  /** 0 to 100, lower spent first. */
  priority: number;
  amount: number;
  available: number;
  reserved: number;
  used: number;
  expired: number;
  /** Absent: the lot never expires. */
  expires_at?: string;
  created_at: string;
  status: LotStatus;
}

export interface LotPage {
  lots: Lot[];
  has_more: boolean;
}

export interface AccountSettings {
  overdraft_limit: number;
  max_active_holds: number | null;
  frozen: boolean;
  /** Absent on events written before balance notices existed. */
  low_balance_threshold?: number | null;
}

/** An entry of the append-only log; event_id increases strictly with commit order. */
export interface LedgerEvent {
  event_id: number;
  account_id: string;
  type: EventType;
  amount: number;
  hold_id?: string;
  job_id?: string;
  /** credited: the lot it made (none when it only paid debt); lot_expired: the lot that expired. */
  lot_id?: string;
  reference?: string;
  reason?: string;
  settings?: AccountSettings;
  at: string;
  available_after: number;
  reserved_after: number;
  used_after: number;
  expired_after: number;
}

/** A credit or debit: the event it wrote and the account after it. */
export interface Transfer {
  event: LedgerEvent;
  account: Account;
}

export interface TransferRecord {
  reference: string;
  account_id: string;
  kind: "credit" | "debit";
  amount: number;
  event_id: number;
  at: string;
}

/** A page of events; pass next_after as `after` to read on (nothing missed, nothing twice). */
export interface EventPage {
  events: LedgerEvent[];
  next_after: number;
}

export interface AccountPage {
  accounts: Account[];
  has_more: boolean;
}

export interface HoldPage {
  holds: Hold[];
  has_more: boolean;
}

export interface JobPage {
  jobs: Job[];
  has_more: boolean;
}

/** What an account key may do: reserve/commit/release/extend holds, submit/cancel jobs, read. */
export type AccountScope = "holds:write" | "jobs:write" | "read";
/** What an admin key may do: everything, or every read and no change at all. */
export type AdminScope = "admin" | "admin:read";
export type Scope = AccountScope | AdminScope;

/**
 * The only time a key's secret is shown. `scopes` in the canonical order (holds:write, jobs:write,
 * read); account_id null for an admin key. scopes, name and expires_at are absent from servers older
 * than scoped keys.
 */
export interface CreatedKey {
  key_id: string;
  account_id: string | null;
  secret: string;
  created_at: string;
  scopes?: Scope[];
  name?: string | null;
  /** null: never expires. */
  expires_at?: string | null;
}

/** The calling key (GET /v1/key), never its secret; the configured admin key is key_id "admin". */
export interface KeyInfo {
  key_id: string;
  /** null: an admin key. */
  account_id: string | null;
  scopes: Scope[];
  name: string | null;
  expires_at: string | null;
  /** null for the configured admin key (it is not stored). */
  created_at: string | null;
}

export interface KeySummary {
  key_id: string;
  account_id: string | null;
  kind: "admin" | "account";
  created_at: string;
  last_used_at: string | null;
  revoked: boolean;
  revoked_at: string | null;
  /** Absent from servers older than scoped keys. */
  scopes?: Scope[];
  name?: string | null;
  expires_at?: string | null;
}

export interface KeyPage {
  keys: KeySummary[];
  has_more: boolean;
}

/**
 * A webhook endpoint (api.md, Webhooks). `secret` (whsec_ + base64) is only in the answer of the
 * create and of a rotation; reads never carry it. event_types / account_id null: every type, every
 * account.
 */
export interface WebhookEndpoint {
  endpoint_id: string;
  url: string;
  event_types: string[] | null;
  account_id: string | null;
  description: string;
  status: "enabled" | "disabled";
  previous_secret_expires_at: string | null;
  /** Every event the endpoint wants up to this event_id was sent at least once. */
  delivery_cursor: number;
  /** The first failed attempt since the last delivered one; null while delivering. */
  failing_since: string | null;
  created_at: string;
  updated_at: string;
  secret?: string;
}

export interface WebhookEndpointPage {
  endpoints: WebhookEndpoint[];
  has_more: boolean;
}

export type WebhookDeliveryStatus = "pending" | "delivered" | "failed";

/**
 * One event's delivery to one endpoint. pending: the last attempt failed and next_attempt_at is the
 * next one; delivered: answered 2xx; failed: every attempt failed (a replay sends it again).
 * last_status_code is null when no answer came; last_error says why the last attempt failed.
 */
export interface WebhookDelivery {
  /** evt_{event_id}: the webhook-id header, the same on every attempt (and replay) of the event. */
  webhook_id: string;
  endpoint_id: string;
  event_id: number;
  event_type: string;
  account_id: string | null;
  event_at: string;
  status: WebhookDeliveryStatus;
  attempts: number;
  last_attempt_at: string | null;
  last_status_code: number | null;
  last_error: string | null;
  next_attempt_at: string | null;
  created_at: string;
}

export interface WebhookDeliveryPage {
  deliveries: WebhookDelivery[];
  has_more: boolean;
}

export interface DeletedWebhookEndpoint {
  endpoint_id: string;
  deleted: boolean;
}

/** The key as it is now (revoked), never its secret. */
export interface RevokedKey {
  key_id: string;
  revoked: boolean;
  account_id?: string | null;
  revoked_at?: string | null;
}

/** completed ⇔ its hold is committed (or late-charged/forgiven); failed, cancelled ⇔ released. */
export interface Job {
  client_request_id: string;
  account_id: string;
  cost: number;
  provider: string;
  status: JobStatus;
  hold_id: string;
  attempts: number;
  result?: unknown;
  error?: string;
  charged: boolean;
  created_at: string;
  updated_at: string;
  /** Only in refundJob's answer: what the job's hold has given back in all. */
  refunded_amount?: number;
}

export interface JobHistory {
  entries: Array<{ at: string; kind: string; attempt?: number; detail: string }>;
}

export interface Lock {
  key: string;
  /** null: free. */
  owner: string | null;
  /** Strictly increases each time the key changes hands. */
  fence: number;
  expires_at: string | null;
  held: boolean;
  cancelled: boolean;
}

/** What renewLock and releaseLock need; take it from acquireLock's answer (lockHolder()). */
export interface LockHolder {
  key: string;
  owner: string;
  /** Absent: only the owner name is checked (not recommended). */
  fence?: number;
}

export interface IdempotencyKey {
  key: string;
  state: "started" | "finished" | "abandoned";
  attempt: number;
  expires_at?: string;
  /** finished: the stored response to replay. */
  response?: unknown;
  finished_at?: string;
  /** started: this claim took over one that ran out unfinished — ask downstream first. */
  resumed?: boolean;
}

export interface RateLimitDecision {
  allowed: true;
  remaining: number;
  reset_after_ms: number;
  limit: number;
  period_ms: number;
}

export interface RateLimitReset {
  policy: string;
  key: string;
  reset: true;
}

export interface AuditReport {
  accounts_checked: number;
  violations: Array<{ account_id: string; message: string }>;
}

export interface Health {
  status: string;
}

export interface Readiness {
  status: string;
  database: string;
  reaper: string;
}

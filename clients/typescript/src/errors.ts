// What a call throws, always a TollgateError (an Error subclass) carrying `code`, `status` and
// `detail`, so a caller branches on `code` alone:
//   - ProblemError: the server refused or failed the call — its RFC 9457 problem document, decoded
//     (status 4xx/5xx, code "insufficient_credits", "refund_exceeds_charge" (409: a refund of more
//     than the hold charged and has not given back: ask for less), …; "http_<status>" when the
//     answer was not a problem document, e.g. from a proxy);
//   - TransportError: no usable HTTP answer (status 0; code "connect", "timeout", "connection_lost",
//     "bad_response");
//   - ArgumentError: the call's arguments or the client's options are wrong (status 0, code
//     "invalid_argument"); thrown before anything is sent.
// `attempts` says how many times the request was sent (0 for an ArgumentError).

/** The failures of a call that got no usable HTTP answer. */
export type TransportFailure = "connect" | "timeout" | "connection_lost" | "bad_response";

export class TollgateError extends Error {
  /** The stable, machine-readable part: what the caller should branch on. */
  readonly code: string;
  /** The HTTP status of the answer; 0 when there was none. */
  readonly status: number;
  /** For a person; for insufficient_credits it is showable to a kiosk user as it is. */
  readonly detail: string;
  /** How many times the request was sent. */
  readonly attempts: number;

  constructor(code: string, status: number, detail: string, attempts: number, message?: string) {
    super(message ?? `${code}: ${detail}`);
    this.name = new.target.name;
    this.code = code;
    this.status = status;
    this.detail = detail;
    this.attempts = attempts;
  }
}

/** The fields a problem document may carry beyond code, status and detail. */
export interface ProblemFields {
  title: string;
  /** insufficient_credits: what was available and what was asked. */
  available?: number;
  requested?: number;
  /**
   * rate_limited: the document's exact retry_after_ms; otherwise the Retry-After header (whole
   * seconds, × 1000) when the server sent one (e.g. 503).
   */
  retryAfterMs?: number;
  /** lock_held, in_progress: when the other's lease or claim ends. */
  expiresAt?: string;
  /**
   * forbidden because of the key's scopes: the scope the call needs (holds:write, jobs:write, read,
   * admin or admin:read).
   */
  missingScope?: string;
  /** The whole document as sent (null when it was not JSON). */
  body: unknown;
}

export class ProblemError extends TollgateError {
  readonly title: string;
  readonly available?: number;
  readonly requested?: number;
  readonly retryAfterMs?: number;
  readonly expiresAt?: string;
  /** forbidden: the scope the key lacks for this call (absent for any other refusal). */
  readonly missingScope?: string;
  readonly body: unknown;

  constructor(code: string, status: number, detail: string, attempts: number, fields: ProblemFields) {
    super(code, status, detail, attempts, describeProblem(code, detail, fields));
    this.title = fields.title;
    if (fields.available !== undefined) this.available = fields.available;
    if (fields.requested !== undefined) this.requested = fields.requested;
    if (fields.retryAfterMs !== undefined) this.retryAfterMs = fields.retryAfterMs;
    if (fields.expiresAt !== undefined) this.expiresAt = fields.expiresAt;
    if (fields.missingScope !== undefined) this.missingScope = fields.missingScope;
    this.body = fields.body;
  }
}

export class TransportError extends TollgateError {
  readonly failure: TransportFailure;
  /** Whether the request may have reached the server (false only when no connection was made). */
  readonly maybeDelivered: boolean;

  constructor(failure: TransportFailure, detail: string, attempts: number, maybeDelivered: boolean) {
    super(failure, 0, detail, attempts);
    this.failure = failure;
    this.maybeDelivered = maybeDelivered;
  }
}

export class ArgumentError extends TollgateError {
  /** The argument or option at fault ("amount", "baseUrl", …). */
  readonly field: string;

  constructor(field: string, detail: string) {
    super("invalid_argument", 0, detail, 0);
    this.field = field;
  }
}

// "code: detail (available A, requested R)", "(expires_at T)" or "(retry_after_ms N)" when the
// document has them — the C++ client's describe().
function describeProblem(code: string, detail: string, fields: ProblemFields): string {
  let out = `${code}: ${detail}`;
  const numbers: string[] = [];
  if (fields.available !== undefined) numbers.push(`available ${fields.available}`);
  if (fields.requested !== undefined) numbers.push(`requested ${fields.requested}`);
  if (numbers.length > 0) out += ` (${numbers.join(", ")})`;
  if (fields.expiresAt !== undefined) out += ` (expires_at ${fields.expiresAt})`;
  const inDocument = isRecord(fields.body) && "retry_after_ms" in fields.body;
  if (fields.retryAfterMs !== undefined && inDocument) out += ` (retry_after_ms ${fields.retryAfterMs})`;
  return out;
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

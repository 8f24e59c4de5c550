// One logical call of the API: the request, built once, sent until it has an answer to report —
// the retry policy of every tollgate client, stated once in docs/reference/retries.md:
//
//   - What is retried: a failed connect (refused, unreachable), a time-out, a lost connection, and
//     an answer 502, 503 or 504 (a balancer whose upstreams restart, a server that lost its
//     database). The request is sent again with exactly the same method, path and body — hence
//     the same request_id, reference, client_request_id or hold id, which the server deduplicates.
//   - Which calls: those that carry such an id or do the same when sent twice (Resend "safe").
//     Calls without one (Resend "only_if_unsent": extend, createKey, beginIdempotency,
//     checkRatelimit) are sent again only when they certainly never reached the server (the
//     connection could not be made); any other failure, a 502/503/504 included, is reported at once.
//   - Back-off: before attempt n+1 the client waits a random time between half and all of
//     backoffInitialMs × 2^(n−1) (capped at backoffMaxMs); a Retry-After header (or a problem
//     document's retry_after_ms) raises the wait to it.
//   - Budget: no wait is started that would end more than budgetMs after the call began (and no
//     more than attemptsMax attempts are made); the last answer or failure is then reported. An
//     attempt under way is bounded by timeoutMs, so the worst case of a call is budgetMs + timeoutMs.
//   - 409 insufficient_credits on reserve: asked once more at once (same request_id), then
//     reported. No back-off: an empty balance does not refill by waiting.
//   - Every other 4xx (and 500): reported at once — the request must change, not be repeated.
//
// Time-outs: `timeoutMs` bounds each attempt, from sending the request to the end of the answer's
// body (an AbortController); a long poll adds its wait to it. Connections are the platform's
// fetch's (keep-alive pooled by Node's undici or the browser).
//
// Thread safety: JavaScript is single-threaded; one Transport may carry any number of concurrent
// calls, each with its own attempts.
import { ProblemError, TransportError, isRecord } from "./errors.js";
import type { TransportFailure } from "./errors.js";

export interface RetryPolicy {
  /** No wait is started that would end more than this after the call began. Default 10000. */
  budgetMs: number;
  /** Attempts of one call in all, the first included (at least 1; 1: never repeat). Default 20. */
  attemptsMax: number;
  /** The wait before the second attempt (at most; half of it at least), doubled before each further one. Default 100. */
  backoffInitialMs: number;
  /** The back-off's cap (a Retry-After may ask for more). Default 2000. */
  backoffMaxMs: number;
  /** reserve answered 409 insufficient_credits: ask once more, at once. Default true. */
  retryInsufficientCreditsOnce: boolean;
}

export const DEFAULT_RETRY_POLICY: Readonly<RetryPolicy> = Object.freeze({
  budgetMs: 10_000,
  attemptsMax: 20,
  backoffInitialMs: 100,
  backoffMaxMs: 2000,
  retryInsufficientCreditsOnce: true,
});

/** The answers that are retried (for "safe" calls). */
export const RETRYABLE_STATUSES: readonly number[] = [502, 503, 504];

/** Whether a call may be sent again after it may already have reached the server. */
export type Resend = "safe" | "only_if_unsent";

/** Told before each resend: which attempt failed, why, and how long the client waits now. */
export interface RetryInfo {
  method: string;
  path: string;
  attempt: number;
  /** A transport failure ("timeout", "connection_lost", "connect"), or the problem's code ("http_502"…). */
  reason: string;
  waitMs: number;
}

/** Told when a call ends with an HTTP answer (a success or a problem). */
export interface AnswerInfo {
  method: string;
  path: string;
  status: number;
  attempts: number;
}

export type FetchFunction = (input: string, init: RequestInit) => Promise<Response>;

export interface TransportOptions {
  /** "http(s)://host:port[/prefix]", without a trailing "/". */
  baseUrl: string;
  key: string | undefined;
  timeoutMs: number;
  retry: RetryPolicy;
  fetch: FetchFunction;
  onRetry: ((info: RetryInfo) => void) | undefined;
  onAnswer: ((info: AnswerInfo) => void) | undefined;
}

export interface RequestSpec {
  method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  /** Path and query, already encoded, from "/". */
  path: string;
  /** Sent as JSON; undefined sends no body. */
  body?: unknown;
  resend: Resend;
  retryInsufficientCredits?: boolean;
  /** Added to timeoutMs for this call (a long poll's wait_ms). */
  extraTimeoutMs?: number;
  /** This call's policy instead of the transport's. */
  retry?: RetryPolicy;
}

/** A 2xx answer: its status, its body (parsed JSON, or the text of a non-JSON answer). */
export interface Answer {
  status: number;
  body: unknown;
  attempts: number;
}

type Outcome =
  | { kind: "answer"; status: number; statusText: string; headers: Headers; text: string }
  | { kind: "failure"; failure: TransportFailure; detail: string; maybeDelivered: boolean };

// Codes (Node's and undici's) that say no connection was made: the request was never sent.
const NOT_CONNECTED = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EADDRNOTAVAIL",
  "UND_ERR_CONNECT_TIMEOUT",
]);

export class Transport {
  constructor(private readonly options: TransportOptions) {}

  async send(spec: RequestSpec): Promise<Answer> {
    const retry = spec.retry ?? this.options.retry;
    const init = this.request(spec); // built once: every attempt sends exactly these bytes
    const url = this.options.baseUrl + spec.path;
    const timeoutMs = this.options.timeoutMs + (spec.extraTimeoutMs ?? 0);
    const started = Date.now();
    let backoffMs = retry.backoffInitialMs;
    let askedAgainForCredits = false;
    // Waits before the next attempt; false (no wait) when out of attempts or out of budget.
    const resendAfter = async (attempt: number, reason: string, retryAfterMs: number | undefined) => {
      if (attempt >= retry.attemptsMax) return false;
      const waitMs = Math.round(Math.max(backoffMs * (0.5 + 0.5 * Math.random()), retryAfterMs ?? 0));
      if (Date.now() - started + waitMs > retry.budgetMs) return false;
      backoffMs = Math.min(backoffMs * 2, retry.backoffMaxMs);
      this.options.onRetry?.({ method: spec.method, path: spec.path, attempt, reason, waitMs });
      await sleep(waitMs);
      return true;
    };
    for (let attempt = 1; ; ++attempt) {
      const outcome = await this.exchange(url, init, timeoutMs);
      if (outcome.kind === "failure") {
        const mayResend = spec.resend === "safe" || !outcome.maybeDelivered;
        if (mayResend && (await resendAfter(attempt, outcome.failure, undefined))) continue;
        throw new TransportError(outcome.failure, outcome.detail, attempt, outcome.maybeDelivered);
      }
      if (outcome.status >= 200 && outcome.status <= 299) {
        const body = parseSuccess(outcome, attempt);
        this.options.onAnswer?.({ method: spec.method, path: spec.path, status: outcome.status, attempts: attempt });
        return { status: outcome.status, body, attempts: attempt };
      }
      const problem = toProblem(outcome, attempt);
      if (
        RETRYABLE_STATUSES.includes(problem.status) &&
        spec.resend === "safe" &&
        (await resendAfter(attempt, problem.code, problem.retryAfterMs))
      ) {
        continue;
      }
      if (
        spec.retryInsufficientCredits === true &&
        retry.retryInsufficientCreditsOnce &&
        !askedAgainForCredits &&
        problem.code === "insufficient_credits"
      ) {
        askedAgainForCredits = true;
        this.options.onRetry?.({ method: spec.method, path: spec.path, attempt, reason: problem.code, waitMs: 0 });
        continue;
      }
      this.options.onAnswer?.({ method: spec.method, path: spec.path, status: problem.status, attempts: attempt });
      throw problem;
    }
  }

  private request(spec: RequestSpec): RequestInit {
    const headers: Record<string, string> = { Accept: "application/json" };
    if (this.options.key !== undefined) headers["Authorization"] = `Bearer ${this.options.key}`;
    const init: RequestInit = { method: spec.method, headers };
    if (spec.body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(spec.body);
    }
    return init;
  }

  // One attempt: send, and read the whole answer within timeoutMs. The deadline is kept here, not
  // left to the platform: the timer aborts the fetch (which frees the connection) and also settles
  // the attempt itself, so an implementation that notices the abort late (seen once with Node 18's
  // fetch: an answer delayed 5 s was awaited whole despite a 300 ms time-out) cannot stretch it.
  private async exchange(url: string, init: RequestInit, timeoutMs: number): Promise<Outcome> {
    const controller = new AbortController();
    const timedOut: Outcome = {
      kind: "failure", failure: "timeout", detail: `no answer from ${url} within ${timeoutMs} ms`, maybeDelivered: true,
    };
    let timer: ReturnType<typeof setTimeout> | undefined;
    const deadline = new Promise<Outcome>((resolve) => {
      timer = setTimeout(() => {
        controller.abort();
        resolve(timedOut);
      }, timeoutMs);
    });
    const attempt = (async (): Promise<Outcome> => {
      try {
        const response = await this.options.fetch(url, { ...init, signal: controller.signal });
        const text = await response.text();
        return {
          kind: "answer",
          status: response.status,
          statusText: response.statusText,
          headers: response.headers,
          text,
        };
      } catch (e) {
        if (controller.signal.aborted) return timedOut;
        const { code, message } = describeFailure(e);
        if (code !== undefined && NOT_CONNECTED.has(code)) {
          return { kind: "failure", failure: "connect", detail: `connect for ${url}: ${message}`, maybeDelivered: false };
        }
        return { kind: "failure", failure: "connection_lost", detail: `${url}: ${message}`, maybeDelivered: true };
      }
    })();
    try {
      return await Promise.race([attempt, deadline]);
    } finally {
      clearTimeout(timer);
    }
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

// fetch rejects with a TypeError ("fetch failed") whose `cause` (Node: possibly nested) carries the
// system's code; browsers give no more than the TypeError.
function describeFailure(e: unknown): { code: string | undefined; message: string } {
  const messages: string[] = [];
  let code: string | undefined;
  let current: unknown = e;
  for (let depth = 0; depth < 4 && current !== undefined && current !== null; ++depth) {
    if (current instanceof Error) {
      messages.push(current.message);
      const own = (current as { code?: unknown }).code;
      if (typeof own === "string") code = own;
      current = (current as { cause?: unknown }).cause;
    } else {
      messages.push(String(current));
      break;
    }
  }
  return { code, message: messages.join(": ") || "fetch failed" };
}

function parseSuccess(answer: Extract<Outcome, { kind: "answer" }>, attempts: number): unknown {
  const contentType = answer.headers.get("content-type") ?? "";
  if (!contentType.includes("json")) return answer.text;
  try {
    return JSON.parse(answer.text);
  } catch (e) {
    const why = e instanceof Error ? e.message : String(e);
    throw new TransportError("bad_response", `the ${answer.status} answer is not valid JSON: ${why}`, attempts, true);
  }
}

// A non-2xx answer, decoded as a problem document when it is one.
function toProblem(answer: Extract<Outcome, { kind: "answer" }>, attempts: number): ProblemError {
  let document: unknown = null;
  try {
    document = JSON.parse(answer.text);
  } catch {
    document = null;
  }
  const fields = isRecord(document) ? document : {};
  const text = (key: string) => (typeof fields[key] === "string" ? (fields[key] as string) : undefined);
  const integer = (key: string) => (Number.isSafeInteger(fields[key]) ? (fields[key] as number) : undefined);
  const code = text("code") || `http_${answer.status}`;
  const title = text("title") || answer.statusText;
  // Not a problem document: keep the start of whatever came, on one line.
  const detail = text("detail") || answer.text.slice(0, 200).replace(/\n/g, " ") || answer.statusText;
  // The document's retry_after_ms is exact; the header counts whole seconds.
  let retryAfterMs = integer("retry_after_ms");
  const header = answer.headers.get("retry-after");
  if (retryAfterMs === undefined && header !== null && /^[0-9]{1,6}$/.test(header.trim())) {
    retryAfterMs = Number(header.trim()) * 1000;
  }
  const available = integer("available");
  const requested = integer("requested");
  const expiresAt = text("expires_at");
  const missingScope = text("missing_scope");
  return new ProblemError(code, answer.status, detail, attempts, {
    title,
    body: document,
    ...(available !== undefined ? { available } : {}),
    ...(requested !== undefined ? { requested } : {}),
    ...(retryAfterMs !== undefined ? { retryAfterMs } : {}),
    ...(expiresAt !== undefined ? { expiresAt } : {}),
    ...(missingScope !== undefined ? { missingScope } : {}),
  });
}

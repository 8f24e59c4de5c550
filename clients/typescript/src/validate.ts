// Argument checks that run before anything is sent: a bad argument throws an ArgumentError naming
// it, and no request leaves the client. The rules are api.md's (Conventions) and the OpenAPI
// document's bounds; the server checks them again.
import { ArgumentError, isRecord } from "./errors.js";

/** The largest amount: 2^53 − 1, exact in every JSON client. */
export const AMOUNT_MAX = Number.MAX_SAFE_INTEGER;
/** A lease or TTL of locks and idempotency keys: 1 ms to 1 day. */
export const LEASE_MS_MAX = 86_400_000;
/** A page: 1 to 1000 items. */
export const PAGE_LIMIT_MAX = 1000;
/** A long poll (getJob, feed): 0 to 60 s. */
export const WAIT_MS_MAX = 60_000;
/** A debit's or a release's reason: at most 1024 bytes. */
export const REASON_BYTES_MAX = 1024;
/** An idempotency key's fingerprint: 1 to 256 bytes. */
export const FINGERPRINT_BYTES_MAX = 256;

const ID_PATTERN = /^[A-Za-z0-9._:@-]{1,128}$/;
const utf8 = new TextEncoder();

function show(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value.length > 40 ? value.slice(0, 40) + "…" : value);
  if (typeof value === "bigint") return `${value}n`;
  if (typeof value === "number" || typeof value === "boolean" || value === null || value === undefined) {
    return String(value);
  }
  return Array.isArray(value) ? "an array" : `a ${typeof value}`;
}

/** A client-chosen id (account_id, request_id, reference, lock key…): 1–128 of [A-Za-z0-9._:@-]. */
export function checkId(value: unknown, field: string): string {
  if (typeof value !== "string" || !ID_PATTERN.test(value)) {
    throw new ArgumentError(field, `${field} must be 1-128 characters of [A-Za-z0-9._:@-], got ${show(value)}`);
  }
  return value;
}

/**
 * An id that goes into the URL's path. "." and ".." cannot: the URL standard (fetch's parser, also
 * for %2E%2E) reads them as a relative path, so the request would reach another route.
 */
export function checkPathId(value: unknown, field: string): string {
  const id = checkId(value, field);
  if (id === "." || id === "..") {
    throw new ArgumentError(field, `${field} "${id}" cannot be sent in a URL path (fetch reads it as a relative path)`);
  }
  return id;
}

/** A server-made id (hold_id, key_id): opaque, but a non-empty string of at most 256 characters. */
export function checkServerId(value: unknown, field: string): string {
  if (typeof value !== "string" || value.length === 0 || value.length > 256 || value === "." || value === "..") {
    throw new ArgumentError(field, `${field} must be the id the server gave (a non-empty string), got ${show(value)}`);
  }
  return value;
}

/** An integer in [min, max] (a JS number: safe integers only). */
export function checkInteger(value: unknown, field: string, min: number, max: number): number {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < min || value > max) {
    throw new ArgumentError(field, `${field} must be an integer from ${min} to ${max}, got ${show(value)}`);
  }
  return value;
}

/** An amount of credits: an integer from 1 to 2^53 − 1 (no fractions, strings or bigints). */
export function checkAmount(value: unknown, field: string): number {
  return checkInteger(value, field, 1, AMOUNT_MAX);
}

/** A string of at most maxBytes bytes of UTF-8 (minBytes: 0 or 1). */
export function checkText(value: unknown, field: string, maxBytes: number, minBytes = 0): string {
  if (typeof value !== "string") throw new ArgumentError(field, `${field} must be a string, got ${show(value)}`);
  const bytes = utf8.encode(value).length;
  if (bytes < minBytes || bytes > maxBytes) {
    throw new ArgumentError(field, `${field} must be ${minBytes}-${maxBytes} bytes of UTF-8, got ${bytes}`);
  }
  return value;
}

export function checkBoolean(value: unknown, field: string): boolean {
  if (typeof value !== "boolean") throw new ArgumentError(field, `${field} must be true or false, got ${show(value)}`);
  return value;
}

export function checkOneOf<T extends string>(value: unknown, field: string, allowed: readonly T[]): T {
  if (typeof value !== "string" || !(allowed as readonly string[]).includes(value)) {
    throw new ArgumentError(field, `${field} must be one of ${allowed.join(", ")}, got ${show(value)}`);
  }
  return value as T;
}

/** A JSON object (a hold's metadata). */
export function checkObject(value: unknown, field: string): Record<string, unknown> {
  if (!isRecord(value)) throw new ArgumentError(field, `${field} must be a JSON object, got ${show(value)}`);
  checkJson(value, field);
  return value;
}

/** Any value JSON can carry, but not undefined (a job's input, an idempotency response). */
export function checkJson(value: unknown, field: string): unknown {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (e) {
    throw new ArgumentError(field, `${field} cannot be sent as JSON: ${e instanceof Error ? e.message : String(e)}`);
  }
  if (text === undefined) throw new ArgumentError(field, `${field} must be a JSON value, got ${show(value)}`);
  return value;
}

/** An options bag: absent, or an object whose keys are all known (a typo is not silently ignored). */
export function checkOptions<T extends object>(value: T | undefined, field: string, known: readonly string[]): Partial<T> {
  if (value === undefined) return {};
  if (!isRecord(value)) throw new ArgumentError(field, `${field} must be an object, got ${show(value)}`);
  for (const key of Object.keys(value)) {
    if (!known.includes(key)) {
      throw new ArgumentError(`${field}.${key}`, `unknown option ${field}.${key} (known: ${known.join(", ")})`);
    }
  }
  return value;
}

const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;

/** An RFC 3339 time as given, or a Date (a valid one) as RFC 3339 UTC with milliseconds. */
export function checkTime(value: unknown, field: string): string {
  if (value instanceof Date) {
    if (Number.isNaN(value.getTime())) throw new ArgumentError(field, `${field} must be a valid Date, got Invalid Date`);
    return value.toISOString();
  }
  if (typeof value !== "string" || !RFC3339.test(value)) {
    throw new ArgumentError(field, `${field} must be an RFC 3339 time such as 2027-01-31T12:00:00Z or a Date, got ${show(value)}`);
  }
  return value;
}

/** A non-empty list of distinct scopes, each one of `allowed`. */
export function checkScopes<T extends string>(value: unknown, field: string, allowed: readonly T[]): T[] {
  if (!Array.isArray(value) || value.length === 0) {
    throw new ArgumentError(field, `${field} must be a non-empty array of ${allowed.join(", ")}, got ${show(value)}`);
  }
  const seen: T[] = [];
  for (const scope of value) {
    const checked = checkOneOf(scope, field, allowed);
    if (seen.includes(checked)) throw new ArgumentError(field, `${field} names ${checked} twice`);
    seen.push(checked);
  }
  return seen;
}

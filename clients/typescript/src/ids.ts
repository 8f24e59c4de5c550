// Random request ids and URL path segments.
//
// Randomness comes from the platform's Web Crypto: globalThis.crypto in browsers and Node 19+; on
// Node 18 (where it is not a global) from node:crypto's webcrypto, loaded once when this module
// loads (a dynamic import that browsers never reach).

interface RandomSource {
  getRandomValues<T extends ArrayBufferView | null>(array: T): T;
}

async function loadRandomSource(): Promise<RandomSource> {
  const global = (globalThis as { crypto?: RandomSource }).crypto;
  if (global !== undefined && typeof global.getRandomValues === "function") return global;
  // Node 18. The specifier is a variable so that bundlers for the browser leave it alone.
  const nodeCrypto = "node:crypto";
  const module = (await import(nodeCrypto)) as { webcrypto: RandomSource };
  return module.webcrypto;
}

const randomSource: RandomSource = await loadRandomSource();

/** `prefix` followed by 16 hex digits (64 random bits). */
export function newRequestId(prefix = "client-"): string {
  const bytes = randomSource.getRandomValues(new Uint8Array(8));
  let hex = "";
  for (const b of bytes) hex += b.toString(16).padStart(2, "0");
  return prefix + hex;
}

/**
 * Percent-encodes one path segment or query value: unreserved characters, ":" and "@" stay (the
 * C++ client's encode_component). Ids that reach a path have been checked: never "." or "..".
 */
export function encodeComponent(text: string): string {
  return encodeURIComponent(text)
    .replace(/%3A/g, ":")
    .replace(/%40/g, "@")
    .replace(/[!'()*]/g, (c) => "%" + c.charCodeAt(0).toString(16).toUpperCase());
}

/** A path with query parameters, each added only when set. */
export function withQuery(path: string, query: Record<string, string | number | undefined>): string {
  const parts: string[] = [];
  for (const [key, value] of Object.entries(query)) {
    if (value !== undefined) parts.push(`${key}=${encodeComponent(String(value))}`);
  }
  return parts.length === 0 ? path : `${path}?${parts.join("&")}`;
}

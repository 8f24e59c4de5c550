// @tollgate/client — tollgate's HTTP API for TypeScript and JavaScript (Node 18+, browsers).
// The client and its options: client.ts; the retry policy: transport.ts; errors: errors.ts; the
// answers' shapes: types.ts; withHold: hold.ts.
export { TollgateClient, lockHolder } from "./client.js";
export type {
  ClientOptions,
  CreateKeyOptions,
  CreditOptions,
  FeatureQuantity,
  PageOptions,
  RefundOptions,
  ReserveOptions,
  SubmitJobOptions,
} from "./client.js";
export { HoldHandle } from "./hold.js";
export type { HoldWork } from "./hold.js";
export { ArgumentError, ProblemError, TollgateError, TransportError } from "./errors.js";
export type { ProblemFields, TransportFailure } from "./errors.js";
export { DEFAULT_RETRY_POLICY } from "./transport.js";
export type { Answer, AnswerInfo, FetchFunction, Resend, RetryInfo, RetryPolicy } from "./transport.js";
export { encodeComponent, newRequestId } from "./ids.js";
export * from "./types.js";

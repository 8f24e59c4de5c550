// A payment-notification signer for tollgate's tests, whose signatures are not ours: the headers a
// payment provider would send, made by the official libraries (versions pinned in
// package-lock.json; nobody here wrote them). The payment tests run it as a process
// (tests/support/payment_signer.h) and send tollgate what it prints.
//
//   node sign.mjs < request.json > headers.json
//
// Standard input: one JSON object, or a JSON array of them (signed in order, answered with an
// array of the same length: many payloads, one process start):
//   {"scheme": "stripe" | "standard", "secret": "…", "payload": "<raw body>", "timestamp": <Unix s>,
//    "id": "<webhook-id>" (standard only)}
// Standard output: one JSON object per request, the headers to send (every value a string):
//   stripe:   {"Stripe-Signature": "t=<timestamp>,v1=<hex>"}
//             by stripe.webhooks.generateTestHeaderString({payload, secret, timestamp}) of the
//             `stripe` package: v1 = hex(HMAC-SHA256(secret as its UTF-8 bytes, "{t}.{payload}"))
//   standard: {"webhook-id": id, "webhook-timestamp": "<timestamp>", "webhook-signature": "v1,<base64>"}
//             by new Webhook(secret).sign(id, new Date(timestamp * 1000), payload) of the
//             `standardwebhooks` package (secret "whsec_<base64 key>", or the base64 key alone)
//
// The payload is signed as its UTF-8 bytes (standard input must be UTF-8: other bytes are refused). timestamp must be a positive whole number: the stripe
// library takes 0 (or none) to mean "now", which a test must never get by accident. Bad input (not
// JSON, a missing or mistyped field, a secret the library refuses): nothing on stdout, a message on
// stderr, exit 2. No network: the Stripe client is made with a placeholder key and no request is
// sent; its webhook helpers compute locally (node:crypto).
//
// Node 18 (Debian 12's nodejs) or later.
import standardwebhooks from "standardwebhooks";
import Stripe from "stripe";

const { Webhook } = standardwebhooks;
const stripe = new Stripe("sk_test_placeholder_never_sent");

function fail(message) {
  process.stderr.write(`sign.mjs: ${message}\n`);
  process.exit(2);
}

function text(request, where, name) {
  const value = request[name];
  if (typeof value !== "string") fail(`${where}: "${name}" must be a string, not ${JSON.stringify(value)}`);
  return value;
}

function sign(request, where) {
  if (request === null || typeof request !== "object" || Array.isArray(request)) {
    fail(`${where}: a request is a JSON object, not ${JSON.stringify(request)}`);
  }
  const known = new Set(["scheme", "secret", "payload", "timestamp", "id"]);
  for (const name of Object.keys(request)) {
    if (!known.has(name)) fail(`${where}: unknown field "${name}"`);
  }
  const scheme = text(request, where, "scheme");
  const secret = text(request, where, "secret");
  const payload = text(request, where, "payload");
  const timestamp = request.timestamp;
  if (!Number.isSafeInteger(timestamp) || timestamp <= 0) {
    fail(`${where}: "timestamp" must be a positive whole number of seconds, not ${JSON.stringify(timestamp)}`);
  }
  if (secret === "") fail(`${where}: "secret" is empty`);
  switch (scheme) {
    case "stripe": {
      if (request.id !== undefined) fail(`${where}: "id" is for the standard scheme only`);
      const header = stripe.webhooks.generateTestHeaderString({ payload, secret, timestamp });
      return { "Stripe-Signature": header };
    }
    case "standard": {
      const id = text(request, where, "id");
      let webhook;
      try {
        webhook = new Webhook(secret);
      } catch (e) {
        return fail(`${where}: a secret the standardwebhooks library refuses: ${e.message}`);
      }
      const signature = webhook.sign(id, new Date(timestamp * 1000), payload);
      return { "webhook-id": id, "webhook-timestamp": String(timestamp), "webhook-signature": signature };
    }
    default:
      return fail(`${where}: "scheme" must be "stripe" or "standard", not ${JSON.stringify(scheme)}`);
  }
}

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
let textIn;
try {
  // Strict: an invalid byte would otherwise become U+FFFD, and a payload other than the one sent
  // would be signed.
  textIn = new TextDecoder("utf-8", { fatal: true }).decode(Buffer.concat(chunks));
} catch (e) {
  fail(`standard input is not UTF-8: ${e.message}`);
}
let input;
try {
  input = JSON.parse(textIn);
} catch (e) {
  fail(`standard input is not JSON: ${e.message}`);
}
const answer = Array.isArray(input) ? input.map((request, i) => sign(request, `request ${i}`)) : sign(input, "request");
process.stdout.write(JSON.stringify(answer) + "\n");

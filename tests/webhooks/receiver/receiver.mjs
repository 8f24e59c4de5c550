// A webhook receiver for tollgate's tests, whose signature check is not ours: every request is
// verified by `new Webhook(secret).verify(body, headers)` of the reference library of Standard
// Webhooks (the `standardwebhooks` package on npm, version pinned in package-lock.json; nobody here
// wrote it). The delivery tests start it as a real process (tests/support/reference_receiver.h) and
// read what it saw from its log.
//
//   node receiver.mjs --secret whsec_… [--secret whsec_…] [--port N] [--log FILE]
//                     [--fail-first N] [--drop-first N] [--slow-ms M] [--status CODE]
//
//   --secret whsec_…  a secret the receiver knows (at least one; repeatable). A request verifies when
//                     the library accepts it with any of them: a receiver in the middle of a rotation.
//   --port N          listens on 127.0.0.1:N (0, the default: any free port). Once it listens it
//                     prints one line on stdout, {"port": N}, and nothing else ever.
//   --log FILE        appends one JSON line per request, written before the answer is sent (so a
//                     client that has its answer finds the line already there):
//                       {"webhook_id", "timestamp", "verified", "error"?, "type", "event_id",
//                        "attempt_seen", "answered", "received_at_ms"}
//                     webhook_id and timestamp are the webhook-id and webhook-timestamp headers
//                     (null when missing; timestamp a number when it is one); type and event_id are
//                     the body's "type" and "data"."event_id" (null when the body has none, or is
//                     not JSON); attempt_seen counts the requests with this webhook-id so far, this
//                     one included (signed or not); answered is the status sent or "dropped";
//                     received_at_ms is when the request's body had arrived (Unix ms); error is the
//                     library's message when verification failed (one per secret, "; "-joined).
//   --drop-first N    the first N requests of each webhook-id: the connection is destroyed without
//                     an answer (a receiver that crashed mid-request)
//   --fail-first N    the next N requests of each webhook-id (after the dropped ones): answered 500
//   --slow-ms M       waits M ms before answering or dropping any request
//   --status CODE     the answer to every other verified request (default 200)
//
// Precedence, per request: a request that does not verify is answered 400 (never dropped or
// failed); then drop-first, fail-first, then --status. Unparseable options exit 2 with a message.
//
// Time stamps (what the library does, read in its source, standardwebhooks 1.3.0 dist/index.js):
// verify(payload, headers, options) has one option, `jsonParse` (this receiver passes false and
// parses the body itself, so a body that is not JSON is a verification question only). The time
// stamp check cannot be turned off or widened: verifyTimestamp() refuses a webhook-timestamp more
// than 5 minutes (WEBHOOK_TOLERANCE_IN_SECONDS = 300) before or after Date.now() of this process,
// with "Message timestamp too old" / "too new". So every delivery this receiver accepts must carry a
// time stamp within 5 minutes of the real clock: a test that runs tollgate on an injected clock
// verifies here only if the delivery's webhook-timestamp comes from the wall clock (or the injected
// clock starts near it). The signatures compared are each space-separated "v1,…" of the header, as
// sent, in constant time.
//
// Node 18 (Debian 12's nodejs) or later; node:http only; the library's two dependencies are pure JS.
import fs from "node:fs";
import http from "node:http";
import standardwebhooks from "standardwebhooks";

const { Webhook } = standardwebhooks;

function usage(message) {
  process.stderr.write(`receiver.mjs: ${message}\n`);
  process.exit(2);
}

function count(name, text) {
  if (!/^[0-9]+$/.test(text ?? "")) usage(`${name} takes a whole number, not ${JSON.stringify(text)}`);
  return Number(text);
}

function parse(argv) {
  const options = { port: 0, secrets: [], log: null, failFirst: 0, dropFirst: 0, slowMs: 0, status: 200 };
  for (let i = 0; i < argv.length; i += 2) {
    const [name, value] = [argv[i], argv[i + 1]];
    if (value === undefined) usage(`${name} needs a value`);
    switch (name) {
      case "--port": options.port = count(name, value); break;
      case "--secret": options.secrets.push(value); break;
      case "--log": options.log = value; break;
      case "--fail-first": options.failFirst = count(name, value); break;
      case "--drop-first": options.dropFirst = count(name, value); break;
      case "--slow-ms": options.slowMs = count(name, value); break;
      case "--status": options.status = count(name, value); break;
      default: usage(`unknown option ${name}`);
    }
  }
  if (options.secrets.length === 0) usage("at least one --secret whsec_… is needed");
  if (options.port > 65535) usage(`--port ${options.port} is not a port`);
  if (options.status < 100 || options.status > 599) usage(`--status ${options.status} is not an HTTP status`);
  return options;
}

const options = parse(process.argv.slice(2));
const webhooks = options.secrets.map((secret) => {
  try {
    return new Webhook(secret);
  } catch (e) {
    return usage(`a --secret the library refuses: ${e.message}`);
  }
});
const seen = new Map();  // webhook-id → requests received with it

// { verified, error? } by the library, with every secret until one accepts.
function verify(body, headers) {
  const errors = [];
  for (const webhook of webhooks) {
    try {
      webhook.verify(body, headers, { jsonParse: false });
      return { verified: true };
    } catch (e) {
      errors.push(e.message);
    }
  }
  return { verified: false, error: errors.join("; ") };
}

function fields_of(body) {
  try {
    const parsed = JSON.parse(body.toString("utf8"));
    return { type: parsed?.type ?? null, event_id: parsed?.data?.event_id ?? null };
  } catch {
    return { type: null, event_id: null };
  }
}

function decide(verified, attempt) {
  if (!verified) return 400;
  if (attempt <= options.dropFirst) return "dropped";
  if (attempt <= options.dropFirst + options.failFirst) return 500;
  return options.status;
}

function handle(request, response, body) {
  const received_at_ms = Date.now();
  const id = request.headers["webhook-id"] ?? null;
  const attempt_seen = (seen.get(id) ?? 0) + 1;
  seen.set(id, attempt_seen);
  const timestampHeader = request.headers["webhook-timestamp"];
  const timestamp = timestampHeader === undefined ? null
    : /^[0-9]+$/.test(timestampHeader) ? Number(timestampHeader) : timestampHeader;
  const check = verify(body, request.headers);
  const answered = decide(check.verified, attempt_seen);
  const entry = { webhook_id: id, timestamp, ...check, ...fields_of(body), attempt_seen, answered, received_at_ms };
  if (options.log !== null) fs.appendFileSync(options.log, JSON.stringify(entry) + "\n");
  setTimeout(() => {
    if (answered === "dropped") {
      request.socket.destroy();
      return;
    }
    const text = JSON.stringify(check.verified ? { received: id } : { error: check.error });
    response.writeHead(answered, { "Content-Type": "application/json" });
    response.end(text);
  }, options.slowMs);
}

const server = http.createServer((request, response) => {
  const chunks = [];
  request.on("data", (chunk) => chunks.push(chunk));
  request.on("end", () => handle(request, response, Buffer.concat(chunks)));
});
server.listen(options.port, "127.0.0.1", () => {
  process.stdout.write(JSON.stringify({ port: server.address().port }) + "\n");
});
for (const signal of ["SIGTERM", "SIGINT"]) process.on(signal, () => process.exit(0));

// Makes the signature vectors of tests/webhooks/signature_test.cc with the reference implementation
// of Standard Webhooks (the `standardwebhooks` package on npm, which nobody here wrote). Not run by
// the test suite (no network there); run it by hand to check or extend the vectors:
//   d=$(mktemp -d) && (cd $d && npm install standardwebhooks@1.3.0) &&
//   NODE_PATH=$d/node_modules node tests/webhooks/make_signature_vectors.js
// Each line printed is a C++ initializer {secret, id, timestamp, body, signature}; the last part
// checks that the library's verify() accepts a two-signature header (a rotation) and refuses a
// changed body.
const { Webhook } = require("standardwebhooks");

const bytes = (n, f) => Buffer.from(Array.from({ length: n }, (_, i) => f(i)));
const secrets = [
  "whsec_" + bytes(32, (i) => i).toString("base64"),
  "whsec_" + bytes(32, (i) => (i * 37 + 11) & 0xff).toString("base64"),
  "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",  // the Standard Webhooks specification's example secret
];
const cases = [
  ["evt_1", 1700000000, '{"type":"credited","timestamp":"2023-11-14T22:13:20.000Z","data":{"event_id":1}}'],
  ["evt_9007199254740991", 1799999999, '{"type":"balance_low","data":{"account_id":"kiosk-7","available_after":3}}'],
  ["evt_42", 0, ""],
  ["evt_7", 1733500000, '{"note":"caf\u00e9 \u2014 \u00fcnicode"}'],
];
const cpp = (s) => JSON.stringify(s).replace(/[\u0080-\uffff]/g, (c) =>
  Buffer.from(c, "utf8").reduce((o, b) => o + "\\x" + b.toString(16), "") + '""');
for (const secret of secrets) {
  for (const [id, ts, body] of cases) {
    const sig = new Webhook(secret).sign(id, new Date(ts * 1000), body);
    console.log(`    {${cpp(secret)}, ${cpp(id)}, ${ts}, ${cpp(body)}, ${cpp(sig)}},`);
  }
}
// A rotation: both signatures in one header; the reference verify() accepts it with either secret.
const now = Math.floor(Date.now() / 1000);
const body = '{"type":"credited"}';
const header = [secrets[0], secrets[1]].map((s) => new Webhook(s).sign("evt_5", new Date(now * 1000), body)).join(" ");
for (const s of [secrets[0], secrets[1]]) {
  new Webhook(s).verify(body, { "webhook-id": "evt_5", "webhook-timestamp": String(now), "webhook-signature": header });
}
let refused = false;
try {
  new Webhook(secrets[0]).verify(body + " ", { "webhook-id": "evt_5", "webhook-timestamp": String(now), "webhook-signature": header });
} catch (e) {
  refused = true;
}
if (!refused) throw new Error("a changed body was accepted");
console.log("// verify: a two-signature header accepted with either secret; a changed body refused");

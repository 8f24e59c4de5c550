// Routes of coordination (api.md: Locks, Idempotency keys, Rate limits) — admin calls.
//
// Locks and idempotency keys are rows in the store, changed through the ledger's batches (durable
// before the answer). Rate limits are the RateLimits service's (coord/rate_limits.h): it chooses
// the local or shared budget; a local check is answered at once, on the I/O thread.
#include <limits>
#include <memory>
#include <string>

#include "core/checked.h"
#include "core/limits.h"
#include "http/routes.h"

namespace tollgate::http {
namespace {

void append_lock(std::string& out, const coord::Lock& l, std::int64_t now_ms) {
  out += "{\"key\":";
  append_json_string(out, l.key);
  out += ",\"owner\":";
  if (l.owner) {
    append_json_string(out, *l.owner);
  } else {
    out += "null";
  }
  out += ",\"fence\":";
  append_json_int(out, l.fence);
  out += ",\"expires_at\":";
  if (l.expires_at_ms) {
    append_json_time(out, *l.expires_at_ms);
  } else {
    out += "null";
  }
  out += ",\"held\":";
  const bool held = coord::is_held(l, now_ms);
  out += held ? "true" : "false";
  out += ",\"lease_left_ms\":";  // on the store's clock; null when not held
  if (held) {
    append_json_int(out, *l.expires_at_ms - now_ms);
  } else {
    out += "null";
  }
  out += ",\"cancelled\":";
  out += l.cancelled ? "true" : "false";
  out += '}';
}

CoordCounters* counters(Context& ctx) { return ctx.options.coord_counters; }

// `c` may be null (not counted). Callbacks of the ledger run after the request's Context is gone:
// they capture this pointer (into the Api's options, which outlive every request), never the Context.
void count_lock(CoordCounters* c, const CommandResult& r) {
  if (c == nullptr) return;
  if (r) return c->count(outcome<coord::LockOutcome>(r).decision);
  switch (r.code()) {
    case Code::lock_held: return c->count(CoordCounters::LockRefusal::held);
    case Code::lock_lost: return c->count(CoordCounters::LockRefusal::lost);
    case Code::not_found: return c->count(CoordCounters::LockRefusal::not_found);
    default: return;
  }
}

// Submits a lock command; the answer is the lock as it is now (a renew of a cancelled lock: 409
// lock_cancelled, after the lock was freed).
void submit_lock(Context& ctx, Call& call, coord::LockCommand command) {
  ctx.ledger.submit(std::move(command), [counted = counters(ctx), reply = std::move(call.reply),
                                         dispatch = call.dispatch](CommandResult r) mutable {
    count_lock(counted, r);
    dispatch([reply = std::move(reply), r = std::move(r)]() mutable {
      if (!r) return reply(problem(r.error()));
      const auto& o = outcome<coord::LockOutcome>(r);
      if (o.decision == coord::LockDecision::stopped) {
        return reply(problem(Error::make(Code::lock_cancelled, "lock " + o.lock.key +
                                                                   " was cancelled: stop the work; the lock is free now")));
      }
      reply(written_response(200, [&](std::string& out) { append_lock(out, o.lock, o.now_ms); }));
    });
  });
}

Result<coord::LockCommand> lock_command(Context&, Call& call, coord::LockOp op) {
  if (auto s = check_id(call.params[0], "key"); !s) return s.error();
  auto body = body_object(call);
  if (!body) return body.error();
  FieldReader f(*body);
  coord::LockCommand c;
  c.op = op;
  c.key = call.params[0];
  if (op != coord::LockOp::cancel) {
    auto owner = f.id("owner");
    if (!owner) return owner.error();
    c.owner = *owner;
  }
  if (op == coord::LockOp::acquire || op == coord::LockOp::renew) {
    auto ttl = f.required_integer("ttl_ms", 1, limits::kLockTtlMsMax);
    if (!ttl) return ttl.error();
    c.ttl_ms = *ttl;
  }
  if (op == coord::LockOp::renew || op == coord::LockOp::release) {
    auto fence = f.integer("fence", 1, std::numeric_limits<std::int64_t>::max());
    if (!fence) return fence.error();
    c.fence = *fence;
  }
  if (auto s = f.finish(); !s) return s.error();
  return c;
}

template <coord::LockOp kOp>
void lock_route(Context& ctx, Call& call) {
  auto c = lock_command(ctx, call, kOp);
  TG_REPLY_IF_ERROR(c);
  submit_lock(ctx, call, std::move(*c));
}

// --- idempotency keys ---------------------------------------------------------------------------

// `taken_over`: a begin that took over a claim which ran out unfinished (answered as "resumed").
void append_idempotency(std::string& out, const coord::IdempotencyKey& k, bool taken_over) {
  out += "{\"key\":";
  append_json_string(out, k.key);
  out += ",\"state\":\"";
  out += coord::idem_state_name(k.state);
  out += "\",\"attempt\":";
  append_json_int(out, k.attempt);
  if (k.state == coord::IdemState::started) {
    out += ",\"resumed\":";
    out += taken_over ? "true" : "false";
    out += ",\"expires_at\":";
    append_json_time(out, k.expires_at_ms);
  } else if (k.state == coord::IdemState::finished) {
    out += ",\"response\":";
    out += k.response_json.value_or("null");  // stored as a serialized JSON value
    out += ",\"finished_at\":";
    append_json_time(out, k.finished_at_ms.value_or(k.expires_at_ms));
  }
  out += '}';
}

template <coord::IdemOp kOp>
void idempotency_route(Context& ctx, Call& call) {
  TG_REPLY_IF_ERROR(check_id(call.params[0], "key"));
  auto body = body_object(call);
  TG_REPLY_IF_ERROR(body);
  FieldReader f(*body);
  coord::IdempotencyCommand c;
  c.op = kOp;
  c.key = call.params[0];
  auto fingerprint = f.required_string("fingerprint", limits::kFingerprintLengthMax);
  TG_REPLY_IF_ERROR(fingerprint);
  c.fingerprint = *fingerprint;
  if constexpr (kOp == coord::IdemOp::begin) {
    auto ttl = f.required_integer("ttl_ms", 1, limits::kIdempotencyTtlMsMax);
    TG_REPLY_IF_ERROR(ttl);
    c.ttl_ms = *ttl;
  }
  if constexpr (kOp == coord::IdemOp::finish) {
    auto response = f.any("response", limits::kIdempotencyResponseBytesMax);
    TG_REPLY_IF_ERROR(response);
    if (!*response) return call.reply(problem(invalid("response is required: the JSON value to replay")));
    c.response_json = **response;
  }
  if constexpr (kOp != coord::IdemOp::begin) {
    auto attempt = f.integer("attempt", 1, std::numeric_limits<std::int64_t>::max());
    TG_REPLY_IF_ERROR(attempt);
    c.attempt = *attempt;
  }
  TG_REPLY_IF_ERROR(f.finish());
  ctx.ledger.submit(std::move(c), [n = counters(ctx), reply = std::move(call.reply),
                                   dispatch = call.dispatch](CommandResult r) mutable {
    if (n != nullptr) {
      if (r) {
        n->count(outcome<coord::IdempotencyOutcome>(r).decision);
      } else if (r.code() == Code::in_progress) {
        n->count(CoordCounters::IdemRefusal::in_progress);
      } else if (r.code() == Code::idempotency_mismatch) {
        n->count(CoordCounters::IdemRefusal::mismatch);
      }
    }
    dispatch([reply = std::move(reply), r = std::move(r)]() mutable {
      if (!r) return reply(problem(r.error()));
      const auto& o = outcome<coord::IdempotencyOutcome>(r);
      TG_ASSERT(o.row.has_value());  // a key never begun is not_found, for finish and abandon alike
      const unsigned status = o.decision == coord::IdemDecision::started ? 201 : 200;
      reply(written_response(status, [&](std::string& out) { append_idempotency(out, *o.row, o.taken_over); }));
    });
  });
}

// --- rate limits --------------------------------------------------------------------------------

Response rate_answer(const coord::GcraDecision& d, const coord::RatePolicy& p) {
  return written_response(200, [&](std::string& out) {
    out += "{\"allowed\":true,\"remaining\":";
    append_json_int(out, d.remaining);
    out += ",\"reset_after_ms\":";
    append_json_int(out, d.reset_after_ms);
    out += ",\"limit\":";
    append_json_int(out, p.gcra.limit);
    out += ",\"period_ms\":";
    append_json_int(out, p.gcra.period_ms);
    out += '}';
  });
}

}  // namespace

void acquire_lock(Context& ctx, Call& call) { lock_route<coord::LockOp::acquire>(ctx, call); }
void renew_lock(Context& ctx, Call& call) { lock_route<coord::LockOp::renew>(ctx, call); }
void release_lock(Context& ctx, Call& call) { lock_route<coord::LockOp::release>(ctx, call); }
void cancel_lock(Context& ctx, Call& call) { lock_route<coord::LockOp::cancel>(ctx, call); }

void get_lock(Context& ctx, Call& call) {
  auto read = ctx.ledger.get_lock(call.params[0]);
  TG_REPLY_IF_ERROR(read);
  if (!read->row) return call.reply(problem(not_found("lock " + call.params[0])));
  call.reply(written_response(200, [&](std::string& out) { append_lock(out, *read->row, read->now_ms); }));
}

// GET /v1/locks?starting_after=&limit=&held=: a page of locks by key (store/lists.h's paging).
void list_locks(Context& ctx, Call& call) {
  TG_REPLY_IF_ERROR(known_query(call, {"limit", "starting_after", "held"}));
  auto page = page_request(call);
  TG_REPLY_IF_ERROR(page);
  bool held_only = false;
  if (auto it = call.query.find("held"); it != call.query.end()) {
    if (it->second != "true" && it->second != "false") {
      return call.reply(problem(invalid("held must be true or false")));
    }
    held_only = it->second == "true";
  }
  auto read = ctx.ledger.list_locks(*page, held_only);
  TG_REPLY_IF_ERROR(read);
  call.reply(written_response(200, [&](std::string& out) {
    out += "{\"locks\":[";
    for (std::size_t i = 0; i < read->locks.size(); ++i) {
      if (i > 0) out += ',';
      append_lock(out, read->locks[i], read->now_ms);
    }
    out += "],\"has_more\":";
    out += read->has_more ? "true" : "false";
    out += '}';
  }));
}

// GET /v1/ratelimits: the policies this instance serves, with their parameters and the decisions
// it answered since it started (per instance, like every counter in /metrics).
void list_ratelimits(Context& ctx, Call& call) {
  TG_REPLY_IF_ERROR(known_query(call, {}));
  call.reply(written_response(200, [&](std::string& out) {
    out += "{\"policies\":[";
    bool first = true;
    if (const coord::RatePolicies* policies = ctx.ratelimits.policies()) {
      for (const auto& [name, p] : policies->all()) {
        if (!first) out += ',';
        first = false;
        out += "{\"policy\":";
        append_json_string(out, name);
        out += ",\"limit\":";
        append_json_int(out, p->gcra.limit);
        out += ",\"period_ms\":";
        append_json_int(out, p->gcra.period_ms);
        out += ",\"store\":";
        out += p->shared ? "\"shared\"" : "\"local\"";
        out += ",\"allowed\":";
        append_json_int(out, static_cast<std::int64_t>(p->allowed.load(std::memory_order_relaxed)));
        out += ",\"limited\":";
        append_json_int(out, static_cast<std::int64_t>(p->limited.load(std::memory_order_relaxed)));
        out += ",\"local_keys\":";
        if (p->local) {
          append_json_int(out, static_cast<std::int64_t>(p->local->size()));
        } else {
          out += "null";
        }
        out += '}';
      }
    }
    out += "]}";
  }));
}

void begin_idempotency(Context& ctx, Call& call) { idempotency_route<coord::IdemOp::begin>(ctx, call); }
void finish_idempotency(Context& ctx, Call& call) { idempotency_route<coord::IdemOp::finish>(ctx, call); }
void abandon_idempotency(Context& ctx, Call& call) { idempotency_route<coord::IdemOp::abandon>(ctx, call); }

void check_ratelimit(Context& ctx, Call& call) {
  auto policy = ctx.ratelimits.find(call.params[0]);
  TG_REPLY_IF_ERROR(policy);
  coord::RatePolicy& p = **policy;
  auto body = body_object(call);
  TG_REPLY_IF_ERROR(body);
  FieldReader f(*body);
  auto key = f.id("key");
  TG_REPLY_IF_ERROR(key);
  auto cost = f.integer("cost", 1, p.gcra.limit);
  TG_REPLY_IF_ERROR(cost);
  TG_REPLY_IF_ERROR(f.finish());
  const auto respond = [&p](const Result<coord::GcraDecision>& d) { return d ? rate_answer(*d, p) : problem(d.error()); };
  // Answered here at once (a local policy) or later from the batch (a shared one): either path replies.
  auto reply = std::make_shared<Reply>(std::move(call.reply));
  auto answered = ctx.ratelimits.check(p, *key, cost->value_or(1),
                                       [respond, reply, dispatch = call.dispatch](Result<coord::GcraDecision> d) {
                                         dispatch([respond, reply, d = std::move(d)] { (*reply)(respond(d)); });
                                       });
  if (answered) (*reply)(respond(*answered));
}

void reset_ratelimit(Context& ctx, Call& call) {
  auto policy = ctx.ratelimits.find(call.params[0]);
  TG_REPLY_IF_ERROR(policy);
  coord::RatePolicy& p = **policy;
  auto body = body_object(call);
  TG_REPLY_IF_ERROR(body);
  FieldReader f(*body);
  auto key = f.id("key");
  TG_REPLY_IF_ERROR(key);
  TG_REPLY_IF_ERROR(f.finish());
  const auto respond = [name = p.name, key = *key](const Status& s) {
    if (!s) return problem(s.error());
    return written_response(200, [&](std::string& out) {
      out += "{\"policy\":";
      append_json_string(out, name);
      out += ",\"key\":";
      append_json_string(out, key);
      out += ",\"reset\":true}";
    });
  };
  auto reply = std::make_shared<Reply>(std::move(call.reply));  // at once (local) or after the batch (shared)
  auto answered = ctx.ratelimits.reset(p, *key, [respond, reply, dispatch = call.dispatch](Status s) {
    dispatch([respond, reply, s = std::move(s)] { (*reply)(respond(s)); });
  });
  if (answered) (*reply)(respond(*answered));
}

}  // namespace tollgate::http

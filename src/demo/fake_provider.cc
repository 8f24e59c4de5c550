#include "demo/fake_provider.h"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>

#include <array>
#include <atomic>
#include <cmath>
#include <deque>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/thread_annotations.h"

namespace tollgate::jobs {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace json = boost::json;
using tcp = asio::ip::tcp;

// --- determinism: a hash of (seed, id, delivery, what is drawn), never a shared stream ------------
constexpr std::uint64_t kSaltFault = 1;
constexpr std::uint64_t kSaltLatency = 2;
constexpr std::uint64_t kSaltImage = 3;

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// FNV-1a over the little-endian bytes of seed, the id, delivery and salt, then splitmix64 to spread.
std::uint64_t draw(std::uint64_t seed, std::string_view id, std::uint32_t delivery, std::uint64_t salt) {
  std::uint64_t h = 14695981039346656037ULL;
  auto byte = [&h](unsigned char b) {
    h ^= b;
    h *= 1099511628211ULL;
  };
  for (int i = 0; i < 8; ++i) byte(static_cast<unsigned char>(seed >> (8 * i)));
  for (char c : id) byte(static_cast<unsigned char>(c));
  byte(0xff);  // no id is a prefix of another id plus the numbers
  for (int i = 0; i < 4; ++i) byte(static_cast<unsigned char>(delivery >> (8 * i)));
  for (int i = 0; i < 8; ++i) byte(static_cast<unsigned char>(salt >> (8 * i)));
  return splitmix64(h);
}

double unit_interval(std::uint64_t x) { return static_cast<double>(x >> 11) * 0x1.0p-53; }  // [0, 1)

std::chrono::microseconds scaled(double ms, double time_scale) {
  return std::chrono::microseconds(std::llround(ms * 1000.0 / time_scale));
}

bool unreserved(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
         c == '_' || c == '~';
}

std::string percent_encode(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (char c : s) {
    if (unreserved(c)) {
      out += c;
    } else {
      const auto b = static_cast<unsigned char>(c);
      out += '%';
      out += kHex[b >> 4];
      out += kHex[b & 15];
    }
  }
  return out;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::optional<std::string> percent_decode(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    if (i + 2 >= s.size()) return std::nullopt;
    const int hi = hex_value(s[i + 1]), lo = hex_value(s[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

std::string error_json(std::string_view why) { return json::serialize(json::object{{"error", why}}); }

bool is_json_media_type(std::string_view content_type) {
  const auto semicolon = content_type.find(';');
  std::string_view type = content_type.substr(0, semicolon);
  while (!type.empty() && (type.back() == ' ' || type.back() == '\t')) type.remove_suffix(1);
  while (!type.empty() && (type.front() == ' ' || type.front() == '\t')) type.remove_prefix(1);
  return beast::iequals(type, "application/json");
}

using Request = bhttp::request<bhttp::string_body>;

// --- the shared state -----------------------------------------------------------------------------
struct Work {
  std::string id;
  std::size_t input_hash = 0;
  FakeRequestPlan plan;
  // Guarded by Impl::mu while running; constant once ended (and read by waiters then).
  FakeOutcome::State state = FakeOutcome::State::running;
  std::string result_json;
  std::string error;
  std::uint64_t posts = 1;
  // Run once the work ends, outside the lock, given the ended work. They take it as an argument
  // rather than hold it, so that a work and its waiters make no cycle.
  std::vector<std::function<void(const Work&)>> waiters;
};

struct Entry {
  std::shared_ptr<Work> work;        // null: only never-received deliveries so far
  std::uint32_t lost_deliveries = 0;  // never-received POSTs of this id: the next delivery's number
};

struct Counters {
  std::atomic<std::uint64_t> requests{0}, work_started{0}, completed{0}, failed{0}, running{0},
      duplicates_of_work{0}, in_flight{0}, never_received{0}, answers_lost{0}, answers_late{0}, rejected{0};
};

FakeProviderStats read_counters(const Counters& c) {
  FakeProviderStats s;
  s.requests = c.requests.load();
  s.work_started = c.work_started.load();
  s.completed = c.completed.load();
  s.failed = c.failed.load();
  s.running = c.running.load();
  s.duplicates_of_work = c.duplicates_of_work.load();
  s.in_flight = c.in_flight.load();
  s.never_received = c.never_received.load();
  s.answers_lost = c.answers_lost.load();
  s.answers_late = c.answers_late.load();
  s.rejected = c.rejected.load();
  return s;
}

// A 200/422 answer from ended work: what a duplicate (and a faultless first POST) is told.
std::pair<unsigned, std::string> truthful_answer(const Work& w) {
  if (w.state == FakeOutcome::State::completed) return {200, "{\"result\":" + w.result_json + "}"};
  return {422, error_json(w.error)};
}

}  // namespace

struct Session;

struct FakeProvider::Impl {
  explicit Impl(FakeProviderOptions o) : options(std::move(o)) {}

  const FakeProviderOptions options;
  Counters counters;
  std::atomic<std::size_t> connections{0};
  std::atomic<bool> stopping{false};
  std::uint16_t bound_port = 0;  // constant after construction

  mutable Mutex mu;
  std::unordered_map<std::string, Entry> entries GUARDED_BY(mu);
  std::deque<std::string> order GUARDED_BY(mu);  // ids in the order first seen

  // The I/O objects, destroyed by stop() — before the members above, which sessions still touch
  // while the io_context destroys its pending handlers.
  std::optional<asio::io_context> io;
  std::optional<tcp::acceptor> acceptor;
  std::optional<asio::steady_timer> accept_retry;
  std::vector<std::thread> threads;
  Mutex stop_mu;
  bool stopped GUARDED_BY(stop_mu) = false;

  void accept();
  void route(const std::shared_ptr<Session>& s, Request req);
  void generate(const std::shared_ptr<Session>& s, const Request& req);
  void status(const std::shared_ptr<Session>& s, std::string_view encoded_id);
  void finish(const std::shared_ptr<Work>& w);
  bool make_room_locked() REQUIRES(mu);
  void stop();
};

struct Session : std::enable_shared_from_this<Session> {
  Session(FakeProvider::Impl& impl, tcp::socket socket) : impl(impl), stream(std::move(socket)) {}
  ~Session() {
    if (generate_in_flight) impl.counters.in_flight.fetch_sub(1);
    impl.connections.fetch_sub(1);
  }

  FakeProvider::Impl& impl;
  beast::tcp_stream stream;
  beast::flat_buffer buffer;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser;
  bhttp::response<bhttp::string_body> response;  // the answer being written
  std::array<char, 4096> discard{};
  // Touched on the strand only:
  bool keep_alive = true;
  unsigned version = 11;
  bool generate_in_flight = false;  // the request is a POST /generate not yet answered or closed

  std::chrono::milliseconds idle_timeout() const { return std::chrono::milliseconds(impl.options.idle_timeout_ms); }

  void start() {
    asio::dispatch(stream.get_executor(), [self = shared_from_this()] { self->read_head(); });
  }

  void read_head() {
    if (impl.stopping.load()) return close();
    parser.emplace();
    parser->header_limit(static_cast<std::uint32_t>(impl.options.header_bytes_max));
    parser->body_limit(impl.options.body_bytes_max);
    stream.expires_after(idle_timeout());
    bhttp::async_read_header(stream, buffer, *parser,
                             [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_head(ec); });
  }

  void on_head(beast::error_code ec) {
    if (ec) return on_read_error(ec);
    if (const auto length = parser->content_length(); length && *length > impl.options.body_bytes_max) {
      return on_read_error(bhttp::error::body_limit);
    }
    bhttp::async_read(stream, buffer, *parser,
                      [self = shared_from_this()](beast::error_code ec2, std::size_t) { self->on_body(ec2); });
  }

  void on_read_error(beast::error_code ec) {
    if (ec == bhttp::error::body_limit) {
      const auto& head = parser->get();
      if (head.method() == bhttp::verb::post && head.target().starts_with("/generate")) {
        impl.counters.requests.fetch_add(1);
        impl.counters.rejected.fetch_add(1);
      }
      version = head.version() == 10 ? 10 : 11;
      return answer(413, error_json("the body is larger than " + std::to_string(impl.options.body_bytes_max) + " bytes"),
                    true);
    }
    if (ec == bhttp::error::header_limit) return answer(431, error_json("the request head is too large"), true);
    if (ec.category() == beast::error_code(bhttp::error::bad_target).category() && ec != bhttp::error::end_of_stream &&
        ec != bhttp::error::partial_message) {
      return answer(400, error_json("malformed HTTP request: " + ec.message()), true);
    }
    close();  // end of stream, time-out, reset: nothing to answer
  }

  void on_body(beast::error_code ec) {
    if (ec) return on_read_error(ec);
    stream.expires_never();  // the answer waits on the work's timer, which bounds it
    Request req = parser->release();
    keep_alive = req.keep_alive();
    version = req.version();
    impl.route(shared_from_this(), std::move(req));
  }

  // Writes one answer (on the strand). `then_close`: after it, close (lingering, so the client
  // reads the answer even when it is still sending a body we refused).
  void answer(unsigned status, std::string body, bool then_close = false, std::string_view allow = {}) {
    if (generate_in_flight) {
      generate_in_flight = false;
      impl.counters.in_flight.fetch_sub(1);
    }
    const bool keep = keep_alive && !then_close && !impl.stopping.load();
    response = {};
    response.version(version);
    response.result(status);
    response.set(bhttp::field::server, "tollgate-fake-provider");
    response.set(bhttp::field::content_type, "application/json");
    if (!allow.empty()) response.set(bhttp::field::allow, allow);
    response.body() = std::move(body);
    response.keep_alive(keep);
    response.prepare_payload();
    stream.expires_after(idle_timeout());
    bhttp::async_write(stream, response, [self = shared_from_this(), keep, then_close](beast::error_code ec, std::size_t) {
      if (ec) return self->close();
      if (then_close) return self->linger();
      if (!keep) return self->close();
      self->read_head();
    });
  }

  // Answers from another thread or from a timer: through the strand.
  void answer_later(unsigned status, std::string body) {
    asio::post(stream.get_executor(), [self = shared_from_this(), status, body = std::move(body)]() mutable {
      self->answer(status, std::move(body));
    });
  }

  // Never received: close without a word.
  void drop() {
    if (generate_in_flight) {
      generate_in_flight = false;
      impl.counters.in_flight.fetch_sub(1);
    }
    close();
  }

  void linger() {
    beast::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream.expires_after(std::chrono::seconds(2));
    drain();
  }
  void drain() {
    stream.async_read_some(asio::buffer(discard), [self = shared_from_this()](beast::error_code ec, std::size_t) {
      if (ec) return self->close();
      self->drain();
    });
  }

  void close() {
    beast::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream.close();
  }
};

// --- requests ---------------------------------------------------------------------------------------
void FakeProvider::Impl::route(const std::shared_ptr<Session>& s, Request req) {
  std::string_view target = req.target();
  if (const auto q = target.find('?'); q != std::string_view::npos) target = target.substr(0, q);
  const bool get = req.method() == bhttp::verb::get;
  if (target == "/generate") {
    if (req.method() != bhttp::verb::post) return s->answer(405, error_json("POST only"), false, "POST");
    return generate(s, req);
  }
  if (target == "/healthz") {
    if (!get) return s->answer(405, error_json("GET only"), false, "GET");
    return s->answer(200, R"({"status":"ok"})");
  }
  if (target == "/stats") {
    if (!get) return s->answer(405, error_json("GET only"), false, "GET");
    return s->answer(200, stats_json(read_counters(counters)));
  }
  if (target.starts_with("/status/")) {
    if (!get) return s->answer(405, error_json("GET only"), false, "GET");
    return status(s, target.substr(8));
  }
  s->answer(404, error_json("no such path: " + std::string(target)));
}

void FakeProvider::Impl::generate(const std::shared_ptr<Session>& s, const Request& req) {
  counters.requests.fetch_add(1);
  counters.in_flight.fetch_add(1);
  s->generate_in_flight = true;
  auto reject = [&](unsigned status, const std::string& why) {
    counters.rejected.fetch_add(1);
    s->answer(status, error_json(why));
  };
  if (!is_json_media_type(req[bhttp::field::content_type])) return reject(415, "Content-Type must be application/json");
  boost::system::error_code ec;
  json::value body = json::parse(req.body(), ec);
  if (ec) return reject(400, "the body is not JSON: " + ec.message());
  const json::object* object = body.if_object();
  const json::value* id_value = object ? object->if_contains("id") : nullptr;
  if (!id_value || !id_value->is_string() || id_value->as_string().empty() ||
      id_value->as_string().size() > options.id_length_max) {
    return reject(400, "the body must be an object with \"id\": a string of 1 to " +
                           std::to_string(options.id_length_max) + " bytes");
  }
  const std::string id(id_value->as_string());
  const auto key = req.find("Idempotency-Key");
  if (key == req.end()) return reject(400, "the Idempotency-Key header is missing");
  if (std::string_view(key->value()) != id) return reject(400, "the Idempotency-Key header differs from the body's id");
  if (options.on_post) options.on_post(id);
  const json::value* input = object->if_contains("input");
  const std::size_t input_hash = std::hash<std::string>{}(input ? json::serialize(*input) : std::string("null"));

  // Decided under the lock, done after it.
  enum class Then { nothing, answer, reject, drop } then = Then::nothing;
  unsigned status = 0;
  std::string answer_body;
  {
    MutexLock lock(mu);
    auto it = entries.find(id);
    if (it != entries.end() && it->second.work) {
      const std::shared_ptr<Work>& w = it->second.work;
      if (w->input_hash != input_hash) {
        then = Then::reject;
        status = 409;
        answer_body = "this Idempotency-Key was used with a different input";
      } else {
        counters.duplicates_of_work.fetch_add(1);
        ++w->posts;
        if (w->state == FakeOutcome::State::running) {
          w->waiters.push_back([s](const Work& ended) {
            auto [code, text] = truthful_answer(ended);
            s->answer_later(code, std::move(text));
          });
        } else {
          then = Then::answer;
          std::tie(status, answer_body) = truthful_answer(*w);
        }
      }
    } else {
      const std::uint32_t delivery = it != entries.end() ? it->second.lost_deliveries : 0;
      const FakeRequestPlan plan = plan_request(options, id, delivery);
      if (plan.fault == FakeFault::never_receive) {
        counters.never_received.fetch_add(1);
        then = Then::drop;
        if (it != entries.end()) {
          ++it->second.lost_deliveries;
        } else if (make_room_locked()) {
          entries.emplace(id, Entry{nullptr, 1});
          order.push_back(id);
        }
      } else if (it == entries.end() && !make_room_locked()) {
        then = Then::reject;
        status = 503;
        answer_body = "too many ids remembered (" + std::to_string(options.ids_remembered_max) + ") and the oldest still runs";
      } else {
        if (it == entries.end()) {
          it = entries.emplace(id, Entry{}).first;
          order.push_back(id);
        }
        auto w = std::make_shared<Work>();
        w->id = id;
        w->input_hash = input_hash;
        w->plan = plan;
        it->second.work = w;
        counters.work_started.fetch_add(1);
        if (plan.fault == FakeFault::refuse) {
          w->state = FakeOutcome::State::failed;
          w->error = "the fake provider refused this request (fail_rate)";
          counters.failed.fetch_add(1);
          then = Then::answer;
          std::tie(status, answer_body) = truthful_answer(*w);
        } else {
          counters.running.fetch_add(1);
          // How the POST that started the work is answered when it ends.
          switch (plan.fault) {
            case FakeFault::lose_answer:
              w->waiters.push_back([this, s](const Work&) {
                counters.answers_lost.fetch_add(1);
                s->answer_later(500, error_json("the work was done but this answer was lost (lost_answer_rate)"));
              });
              break;
            case FakeFault::answer_late:
              w->waiters.push_back([this, s](const Work& ended) {
                counters.answers_late.fetch_add(1);
                auto timer = std::make_shared<asio::steady_timer>(*io, ended.plan.late_extra);
                timer->async_wait([s, timer, answer = truthful_answer(ended)](beast::error_code e) mutable {
                  if (!e) s->answer_later(answer.first, std::move(answer.second));
                });
              });
              break;
            default:
              w->waiters.push_back([s](const Work& ended) {
                auto [code, text] = truthful_answer(ended);
                s->answer_later(code, std::move(text));
              });
          }
          auto timer = std::make_shared<asio::steady_timer>(*io, plan.latency);
          timer->async_wait([this, w, timer](beast::error_code e) {
            if (!e) finish(w);
          });
        }
      }
    }
  }
  switch (then) {
    case Then::nothing: return;  // a waiter answers
    case Then::answer: return s->answer(status, std::move(answer_body));
    case Then::reject: return reject(status, answer_body);
    case Then::drop: return s->drop();
  }
}

void FakeProvider::Impl::finish(const std::shared_ptr<Work>& w) {
  std::string result = fake_result_json(w->id, w->plan.image_seed);
  std::vector<std::function<void(const Work&)>> waiters;
  {
    MutexLock lock(mu);
    w->state = FakeOutcome::State::completed;
    w->result_json = std::move(result);
    waiters.swap(w->waiters);
    counters.completed.fetch_add(1);
    counters.running.fetch_sub(1);
  }
  for (auto& waiter : waiters) waiter(*w);
}

void FakeProvider::Impl::status(const std::shared_ptr<Session>& s, std::string_view encoded_id) {
  const std::optional<std::string> id = percent_decode(encoded_id);
  if (!id || id->empty()) return s->answer(400, error_json("the id in the path is not a percent-encoded id"));
  std::string body;
  {
    MutexLock lock(mu);
    auto it = entries.find(*id);
    if (it == entries.end() || !it->second.work) {
      body.clear();
    } else {
      const Work& w = *it->second.work;
      switch (w.state) {
        case FakeOutcome::State::running: body = R"({"status":"running"})"; break;
        case FakeOutcome::State::completed: body = R"({"status":"completed","result":)" + w.result_json + "}"; break;
        case FakeOutcome::State::failed:
          body = json::serialize(json::object{{"status", "failed"}, {"error", w.error}});
          break;
      }
    }
  }
  if (body.empty()) return s->answer(404, error_json("never received"));
  s->answer(200, std::move(body));
}

// First in, first out; a running work at the front stops the forgetting.
bool FakeProvider::Impl::make_room_locked() {
  while (entries.size() >= options.ids_remembered_max && !order.empty()) {
    auto it = entries.find(order.front());
    if (it != entries.end()) {
      if (it->second.work && it->second.work->state == FakeOutcome::State::running) return false;
      entries.erase(it);
    }
    order.pop_front();
  }
  return entries.size() < options.ids_remembered_max;
}

void FakeProvider::Impl::accept() {
  acceptor->async_accept(asio::make_strand(*io), [this](beast::error_code ec, tcp::socket socket) {
    if (ec) {
      if (stopping.load() || ec == asio::error::operation_aborted) return;
      // Out of descriptors or the like: try again shortly rather than spin.
      accept_retry->expires_after(std::chrono::milliseconds(10));
      accept_retry->async_wait([this](beast::error_code e) {
        if (!e) accept();
      });
      return;
    }
    if (connections.load() >= options.connections_max) {
      beast::error_code ignored;
      socket.close(ignored);
      return accept();
    }
    connections.fetch_add(1);
    beast::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    std::make_shared<Session>(*this, std::move(socket))->start();
    accept();
  });
}

void FakeProvider::Impl::stop() {
  MutexLock stop_lock(stop_mu);
  if (stopped) return;
  stopped = true;
  stopping.store(true);
  io->stop();
  for (auto& t : threads) t.join();
  threads.clear();
  {
    // The waiters hold sessions; the works and sessions go before the io_context.
    MutexLock lock(mu);
    entries.clear();
    order.clear();
  }
  accept_retry.reset();
  acceptor.reset();
  io.reset();  // destroys the pending handlers: every remaining session closes
}

// --- public -----------------------------------------------------------------------------------------
std::string options_error(const FakeProviderOptions& o) {
  auto rate_ok = [](double r) { return r >= 0.0 && r <= 1.0; };  // false for NaN
  if (o.host.empty()) return "host is empty";
  if (o.latency_min_ms < 0 || o.latency_max_ms < o.latency_min_ms) {
    return "latency must be MIN..MAX with 0 <= MIN <= MAX, got " + std::to_string(o.latency_min_ms) + ".." +
           std::to_string(o.latency_max_ms);
  }
  if (!(o.time_scale > 0.0) || !std::isfinite(o.time_scale)) return "time_scale must be a number > 0";
  if (o.late_extra_ms < 0) return "late_extra_ms must be >= 0";
  constexpr double kScaledMsMax = 30.0 * 24 * 3600 * 1000;  // a month: far beyond any client's patience
  if (static_cast<double>(std::max(o.latency_max_ms, o.late_extra_ms)) / o.time_scale > kScaledMsMax) {
    return "latency or late_extra_ms divided by time_scale is longer than 30 days";
  }
  if (!rate_ok(o.fail_rate)) return "fail_rate must be in [0, 1]";
  if (!rate_ok(o.lost_answer_rate)) return "lost_answer_rate must be in [0, 1]";
  if (!rate_ok(o.late_answer_rate)) return "late_answer_rate must be in [0, 1]";
  if (!rate_ok(o.never_received_rate)) return "never_received_rate must be in [0, 1]";
  if (o.fail_rate + o.lost_answer_rate + o.late_answer_rate + o.never_received_rate > 1.0 + 1e-9) {
    return "the fault rates add up to more than 1 (each delivery meets at most one fault)";
  }
  if (o.threads < 1 || o.threads > 256) return "threads must be 1 to 256";
  if (o.ids_remembered_max < 1) return "ids_remembered_max must be >= 1";
  if (o.body_bytes_max < 1 || o.header_bytes_max < 1 || o.connections_max < 1 || o.id_length_max < 1) {
    return "body_bytes_max, header_bytes_max, connections_max and id_length_max must be >= 1";
  }
  if (o.idle_timeout_ms < 1) return "idle_timeout_ms must be >= 1";
  return {};
}

std::string_view fake_fault_name(FakeFault fault) {
  switch (fault) {
    case FakeFault::none: return "none";
    case FakeFault::refuse: return "refuse";
    case FakeFault::lose_answer: return "lose_answer";
    case FakeFault::answer_late: return "answer_late";
    case FakeFault::never_receive: return "never_receive";
  }
  return "?";
}

FakeRequestPlan plan_request(const FakeProviderOptions& o, std::string_view id, std::uint32_t delivery) {
  FakeRequestPlan plan;
  const double u = unit_interval(draw(o.seed, id, delivery, kSaltFault));
  double edge = o.never_received_rate;
  if (u < edge) {
    plan.fault = FakeFault::never_receive;
  } else if (u < (edge += o.fail_rate)) {
    plan.fault = FakeFault::refuse;
  } else if (u < (edge += o.lost_answer_rate)) {
    plan.fault = FakeFault::lose_answer;
  } else if (u < (edge += o.late_answer_rate)) {
    plan.fault = FakeFault::answer_late;
  }
  const auto span = static_cast<std::uint64_t>(o.latency_max_ms - o.latency_min_ms);
  const std::uint64_t offset = span == 0 ? 0 : draw(o.seed, id, 0, kSaltLatency) % (span + 1);
  plan.latency = scaled(static_cast<double>(o.latency_min_ms) + static_cast<double>(offset), o.time_scale);
  plan.late_extra = scaled(static_cast<double>(o.late_extra_ms), o.time_scale);
  plan.image_seed = static_cast<std::uint32_t>(draw(o.seed, id, 0, kSaltImage));
  return plan;
}

std::string fake_result_json(std::string_view id, std::uint32_t image_seed) {
  return json::serialize(json::object{{"image_url", "https://fake/" + percent_encode(id) + ".png"}, {"seed", image_seed}});
}

std::string stats_json(const FakeProviderStats& s) {
  return json::serialize(json::object{{"requests", s.requests},
                                      {"work_started", s.work_started},
                                      {"completed", s.completed},
                                      {"failed", s.failed},
                                      {"running", s.running},
                                      {"duplicates_of_work", s.duplicates_of_work},
                                      {"in_flight", s.in_flight},
                                      {"never_received", s.never_received},
                                      {"answers_lost", s.answers_lost},
                                      {"answers_late", s.answers_late},
                                      {"rejected", s.rejected}});
}

FakeProvider::FakeProvider(FakeProviderOptions options) {
  if (std::string why = options_error(options); !why.empty()) throw std::invalid_argument("fake provider: " + why);
  impl_ = std::make_unique<Impl>(std::move(options));
  Impl& m = *impl_;
  m.io.emplace(m.options.threads);
  m.acceptor.emplace(*m.io);
  m.accept_retry.emplace(*m.io);
  beast::error_code ec;
  const std::string& host = m.options.host;
  const auto address = asio::ip::make_address(host == "localhost" ? "127.0.0.1" : host, ec);
  if (ec) throw std::invalid_argument("fake provider: " + host + " is not an IP address");
  const tcp::endpoint endpoint(address, m.options.port);
  m.acceptor->open(endpoint.protocol(), ec);
  if (!ec) m.acceptor->set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) m.acceptor->bind(endpoint, ec);
  if (!ec) m.acceptor->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    throw std::runtime_error("fake provider: listen on " + host + ":" + std::to_string(m.options.port) + ": " +
                             ec.message());
  }
  m.bound_port = m.acceptor->local_endpoint().port();
  m.accept();
  for (int i = 0; i < m.options.threads; ++i) m.threads.emplace_back([&m] { m.io->run(); });
}

FakeProvider::~FakeProvider() { stop(); }

void FakeProvider::stop() { impl_->stop(); }

std::uint16_t FakeProvider::port() const { return impl_->bound_port; }

std::string FakeProvider::base_url() const {
  std::string host = impl_->options.host;
  if (host == "0.0.0.0" || host == "localhost") host = "127.0.0.1";
  if (host == "::") host = "::1";
  if (host.find(':') != std::string::npos) host = "[" + host + "]";
  return "http://" + host + ":" + std::to_string(impl_->bound_port);
}

const FakeProviderOptions& FakeProvider::options() const { return impl_->options; }

FakeProviderStats FakeProvider::stats() const { return read_counters(impl_->counters); }

std::optional<FakeOutcome> FakeProvider::outcome_of(std::string_view id) const {
  MutexLock lock(impl_->mu);
  auto it = impl_->entries.find(std::string(id));
  if (it == impl_->entries.end() || !it->second.work) return std::nullopt;
  const Work& w = *it->second.work;
  FakeOutcome out;
  out.state = w.state;
  out.result_json = w.result_json;
  out.error = w.error;
  out.fault = w.plan.fault;
  out.posts = w.posts;
  return out;
}

}  // namespace tollgate::jobs

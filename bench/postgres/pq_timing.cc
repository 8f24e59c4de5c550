// bench/postgres/pq_timing.cc — where a PgStore batch spends its wall time, seen from the client.
//
// An LD_PRELOAD library for ledger_bench (or tollgate serve) on PostgreSQL: it wraps libpq's
// synchronous calls (PQexec, PQexecParams, PQprepare, PQexecPrepared) and times each one — one call
// is one round trip to the server (send, server executes, answer). A pipeline (PQenterPipelineMode …
// PQexitPipelineMode, its statements sent with PQsendQueryPrepared) counts as one round trip of N
// statements, timed from entering to leaving pipeline mode. Write transactions are followed
// per connection from their BEGIN to their COMMIT/ROLLBACK; read-only ones (BEGIN … READ ONLY) are
// counted apart. At exit it prints to stderr:
//   - per statement kind (BEGIN; COMMIT; each prepared statement by its SQL; pipelines by their first
//     statement; …): calls, statements, mean µs per call, share of the write transactions' time;
//   - per write transaction: round trips and statements, wall time from the start of BEGIN to the end of
//     COMMIT, of which in COMMIT (the WAL flush the commit waits for, plus one round trip) and in the
//     other statements; and the time the connection was idle between transactions.
// The first PQ_TIMING_SKIP_TX (default 4) write transactions of each connection are not counted (the
// setup batches of a hot cell: accounts, credits), nor is anything before PQ_TIMING_START_S seconds
// after the library loaded (default 0; e.g. 8 for a spread cell's 10,000 accounts); everything else
// counts, a warm-up included.
//
// Build and use (bench/postgres/postgres_bench.sh --profile does this):
//   g++ -O2 -shared -fPIC -o pq_timing.so bench/postgres/pq_timing.cc -ldl
//   LD_PRELOAD=./pq_timing.so ledger_bench --database URI --workloads hot --callers 64
#include <dlfcn.h>
#include <libpq-fe.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

struct Kind {
  std::uint64_t calls = 0, statements = 0, ns = 0, in_tx_ns = 0;
};

struct ConnState {
  std::map<std::string, std::string> prepared;  // statement name → SQL
  bool in_write_tx = false;
  bool in_read_tx = false;
  std::int64_t tx_start = 0, tx_round_trips = 0, tx_statements = 0, tx_commit_ns = 0, last_tx_end = 0;
  // A pipeline being sent: its start, its statements, the SQL of its first one.
  std::int64_t pipeline_start = 0, pipeline_statements = 0;
  std::string pipeline_first;
  std::uint64_t write_tx_seen = 0;
};

struct State {
  std::mutex mu;
  std::map<std::string, Kind> kinds;
  std::map<const PGconn*, ConnState> conns;
  std::uint64_t tx = 0, tx_round_trips = 0, tx_statements = 0, tx_ns = 0, tx_commit_ns = 0, idle_ns = 0, idle_n = 0;
  std::uint64_t read_tx = 0;
  std::vector<std::uint64_t> tx_stmt_hist = std::vector<std::uint64_t>(8, 0);
  std::uint64_t skip = 4;
  std::int64_t start_ns = 0;  // calls that begin earlier are not counted
};

State& state() {
  static State* s = [] {
    auto* st = new State();
    if (const char* v = std::getenv("PQ_TIMING_SKIP_TX")) st->skip = std::strtoull(v, nullptr, 10);
    const char* start = std::getenv("PQ_TIMING_START_S");
    st->start_ns = now_ns() + static_cast<std::int64_t>((start ? std::strtod(start, nullptr) : 0.0) * 1e9);
    return st;
  }();
  return *s;
}

std::string label(const char* sql) {
  std::string s(sql ? sql : "");
  for (char& c : s) {
    if (c == '\n' || c == '\t') c = ' ';
  }
  if (s.size() > 72) s = s.substr(0, 72) + "…";
  return s;
}

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// Books one round trip of `statements` statements (`sql`: the first) on `conn` that took [t0, t1].
void book_locked(State& st, ConnState& c, const std::string& sql, std::int64_t t0, std::int64_t t1,
                 std::int64_t statements = 1, bool pipeline = false) {
  const std::int64_t ns = t1 - t0;
  const bool begin = starts_with(sql, "BEGIN");
  const bool read_only = begin && sql.find("READ ONLY") != std::string::npos;
  const bool end = sql == "COMMIT" || sql == "ROLLBACK";
  if (begin && !read_only) {
    c.in_write_tx = true;
    c.tx_start = t0;
    c.tx_round_trips = 0;
    c.tx_statements = 0;
    c.tx_commit_ns = 0;
    if (c.last_tx_end != 0 && c.write_tx_seen >= st.skip && c.last_tx_end >= st.start_ns) {
      st.idle_ns += static_cast<std::uint64_t>(t0 - c.last_tx_end);
      ++st.idle_n;
    }
  } else if (read_only) {
    c.in_read_tx = true;
    ++st.read_tx;
  }
  const bool counted = t0 >= st.start_ns && (c.in_read_tx || c.write_tx_seen >= st.skip);
  const std::string key = c.in_read_tx ? "(read-only transactions)"
                          : pipeline ? "(pipeline) " + label(sql.c_str())
                                           : label(sql.c_str());
  if (counted) {
    Kind& k = st.kinds[key];
    ++k.calls;
    k.statements += static_cast<std::uint64_t>(statements);
    k.ns += static_cast<std::uint64_t>(ns);
    if (c.in_write_tx) k.in_tx_ns += static_cast<std::uint64_t>(ns);
  }
  if (c.in_write_tx) {
    ++c.tx_round_trips;
    c.tx_statements += statements;
    if (end) c.tx_commit_ns = ns;
  }
  if (end) {
    if (c.in_write_tx) {
      if (c.write_tx_seen >= st.skip && c.tx_start >= st.start_ns) {
        ++st.tx;
        st.tx_round_trips += static_cast<std::uint64_t>(c.tx_round_trips);
        st.tx_statements += static_cast<std::uint64_t>(c.tx_statements);
        st.tx_ns += static_cast<std::uint64_t>(t1 - c.tx_start);
        st.tx_commit_ns += static_cast<std::uint64_t>(c.tx_commit_ns);
        // round trips per transaction: <16, <64, <128, <256, <512, <1024, <2048, more
        static const std::int64_t bounds[] = {16, 64, 128, 256, 512, 1024, 2048};
        std::size_t b = 0;
        while (b < 7 && c.tx_round_trips >= bounds[b]) ++b;
        ++st.tx_stmt_hist[b];
      }
      ++c.write_tx_seen;
      c.last_tx_end = t1;
    }
    c.in_write_tx = false;
    c.in_read_tx = false;
  }
}

void book(const PGconn* conn, const std::string& sql, std::int64_t t0, std::int64_t t1) {
  State& st = state();
  std::lock_guard lock(st.mu);
  book_locked(st, st.conns[conn], sql, t0, t1);
}

template <typename F>
F real(const char* name) {
  void* p = dlsym(RTLD_NEXT, name);
  if (!p) {
    std::fprintf(stderr, "pq_timing: no %s in libpq\n", name);
    std::abort();
  }
  return reinterpret_cast<F>(p);
}

struct Report {
  Report() { state(); }  // the clock of PQ_TIMING_START_S starts when the library loads
  ~Report() {
    State& st = state();
    std::lock_guard lock(st.mu);
    if (st.tx == 0 && st.kinds.empty()) return;
    std::fprintf(stderr, "\npq_timing: libpq round trips (wall time per call, client side)\n");
    std::vector<std::pair<std::string, Kind>> rows(st.kinds.begin(), st.kinds.end());
    std::sort(rows.begin(), rows.end(), [](auto& a, auto& b) { return a.second.ns > b.second.ns; });
    std::fprintf(stderr, "%10s %11s %9s %12s %9s  %s\n", "calls", "statements", "mean us", "total ms", "% of tx",
                 "statement");
    for (auto& [sql, k] : rows) {
      std::fprintf(stderr, "%10llu %11llu %9.1f %12.1f %8.1f%%  %s\n", static_cast<unsigned long long>(k.calls),
                   static_cast<unsigned long long>(k.statements), k.calls ? k.ns / 1e3 / k.calls : 0.0, k.ns / 1e6,
                   st.tx_ns ? 100.0 * k.in_tx_ns / st.tx_ns : 0.0, sql.c_str());
    }
    if (st.tx) {
      const double tx = static_cast<double>(st.tx);
      const double trips = st.tx_round_trips / tx, stmts = st.tx_statements / tx;
      const double wall_us = st.tx_ns / 1e3 / tx, commit_us = st.tx_commit_ns / 1e3 / tx;
      std::fprintf(stderr,
                   "\npq_timing: %llu write transactions (batches): %.1f round trips and %.1f statements each; "
                   "%.1f us each from BEGIN to the end of COMMIT:\n"
                   "  before COMMIT %.1f us (%.1f%%; %.1f us per statement), COMMIT %.1f us (%.1f%%)\n"
                   "  connection idle between batches: %.1f us on average\n",
                   static_cast<unsigned long long>(st.tx), trips, stmts, wall_us, wall_us - commit_us,
                   100.0 * (wall_us - commit_us) / wall_us, stmts > 1 ? (wall_us - commit_us) / (stmts - 1) : 0.0,
                   commit_us, 100.0 * commit_us / wall_us, st.idle_n ? st.idle_ns / 1e3 / st.idle_n : 0.0);
      static const char* names[] = {"<16", "16-63", "64-127", "128-255", "256-511", "512-1023", "1024-2047", ">=2048"};
      std::fprintf(stderr, "  round trips per batch:");
      for (std::size_t b = 0; b < 8; ++b) {
        if (st.tx_stmt_hist[b]) std::fprintf(stderr, " %s: %llu", names[b], static_cast<unsigned long long>(st.tx_stmt_hist[b]));
      }
      std::fprintf(stderr, "\n");
    }
    if (st.read_tx) std::fprintf(stderr, "  read-only transactions: %llu\n", static_cast<unsigned long long>(st.read_tx));
  }
} report;

}  // namespace

extern "C" {

PGresult* PQexec(PGconn* conn, const char* query) {
  static auto fn = real<PGresult* (*)(PGconn*, const char*)>("PQexec");
  const std::int64_t t0 = now_ns();
  PGresult* r = fn(conn, query);
  book(conn, query ? query : "", t0, now_ns());
  return r;
}

PGresult* PQexecParams(PGconn* conn, const char* command, int nParams, const Oid* paramTypes,
                       const char* const* paramValues, const int* paramLengths, const int* paramFormats,
                       int resultFormat) {
  static auto fn = real<PGresult* (*)(PGconn*, const char*, int, const Oid*, const char* const*, const int*,
                                      const int*, int)>("PQexecParams");
  const std::int64_t t0 = now_ns();
  PGresult* r = fn(conn, command, nParams, paramTypes, paramValues, paramLengths, paramFormats, resultFormat);
  book(conn, command ? command : "", t0, now_ns());
  return r;
}

PGresult* PQprepare(PGconn* conn, const char* stmtName, const char* query, int nParams, const Oid* paramTypes) {
  static auto fn = real<PGresult* (*)(PGconn*, const char*, const char*, int, const Oid*)>("PQprepare");
  const std::int64_t t0 = now_ns();
  PGresult* r = fn(conn, stmtName, query, nParams, paramTypes);
  {
    State& st = state();
    std::lock_guard lock(st.mu);
    st.conns[conn].prepared[stmtName ? stmtName : ""] = query ? query : "";
  }
  book(conn, std::string("(prepare) ") + (query ? query : ""), t0, now_ns());
  return r;
}

PGresult* PQexecPrepared(PGconn* conn, const char* stmtName, int nParams, const char* const* paramValues,
                         const int* paramLengths, const int* paramFormats, int resultFormat) {
  static auto fn = real<PGresult* (*)(PGconn*, const char*, int, const char* const*, const int*, const int*, int)>(
      "PQexecPrepared");
  const std::int64_t t0 = now_ns();
  PGresult* r = fn(conn, stmtName, nParams, paramValues, paramLengths, paramFormats, resultFormat);
  const std::int64_t t1 = now_ns();
  std::string sql;
  {
    State& st = state();
    std::lock_guard lock(st.mu);
    auto& prepared = st.conns[conn].prepared;
    auto it = prepared.find(stmtName ? stmtName : "");
    sql = it != prepared.end() ? it->second : std::string("(prepared) ") + (stmtName ? stmtName : "");
  }
  book(conn, sql, t0, t1);
  return r;
}

int PQenterPipelineMode(PGconn* conn) {
  static auto fn = real<int (*)(PGconn*)>("PQenterPipelineMode");
  const std::int64_t t0 = now_ns();
  {
    State& st = state();
    std::lock_guard lock(st.mu);
    ConnState& c = st.conns[conn];
    c.pipeline_start = t0;
    c.pipeline_statements = 0;
    c.pipeline_first.clear();
  }
  return fn(conn);
}

int PQsendQueryPrepared(PGconn* conn, const char* stmtName, int nParams, const char* const* paramValues,
                        const int* paramLengths, const int* paramFormats, int resultFormat) {
  static auto fn = real<int (*)(PGconn*, const char*, int, const char* const*, const int*, const int*, int)>(
      "PQsendQueryPrepared");
  {
    State& st = state();
    std::lock_guard lock(st.mu);
    ConnState& c = st.conns[conn];
    if (c.pipeline_statements++ == 0) {
      auto it = c.prepared.find(stmtName ? stmtName : "");
      c.pipeline_first = it != c.prepared.end() ? it->second : std::string("(prepared) ") + (stmtName ? stmtName : "");
    }
  }
  return fn(conn, stmtName, nParams, paramValues, paramLengths, paramFormats, resultFormat);
}

int PQexitPipelineMode(PGconn* conn) {
  static auto fn = real<int (*)(PGconn*)>("PQexitPipelineMode");
  const int r = fn(conn);
  const std::int64_t t1 = now_ns();
  State& st = state();
  std::lock_guard lock(st.mu);
  ConnState& c = st.conns[conn];
  if (c.pipeline_statements > 0) {
    book_locked(st, c, c.pipeline_first, c.pipeline_start, t1, c.pipeline_statements, /*pipeline=*/true);
  }
  c.pipeline_statements = 0;
  return r;
}

void PQfinish(PGconn* conn) {
  static auto fn = real<void (*)(PGconn*)>("PQfinish");
  {
    State& st = state();
    std::lock_guard lock(st.mu);
    // A new connection may get the same address: forget this one's statements, keep the figures.
    st.conns.erase(conn);
  }
  fn(conn);
}

}  // extern "C"

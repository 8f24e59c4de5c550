// Disk faults under a real server process, over HTTP (issue 12, "Disk and flush faults"):
//
// A full volume — a real one: the database on a small tmpfs mounted for the test, filled up with a
// filler file. Credits answer 503 `storage_full` (with Retry-After) and change nothing, every read
// keeps answering the acknowledged balances, /readyz stays ready (reads work; writes will once
// there is space), the metric counts it; once the filler is deleted the refused requests succeed
// when retried with their references, and after a restart every acknowledged credit is there and
// the audit is clean. Mounting needs root: CI runs as root and sets TOLLGATE_REQUIRE_ROOT_TESTS=1
// (scripts/test), which turns a missing privilege into a failure; elsewhere the test skips and says so.
// The same fault at the unit level, without root: tests/store/storage_faults_test.cc.
//
// A failing flush — the server is tollgate_fault_server (tests/faults/fault_server.cc: `tollgate
// serve` over testing::FaultVfs), whose every fsync answers EIO while the file fail-sync exists. The
// credit whose flush failed is answered 503 `storage_failed`, never 2xx; every later write is refused
// the same way and /readyz answers 503 even after the disk recovered (fsyncgate: after a failed flush
// the page cache cannot be trusted — the store stops writing until a restart). Then the real tollgate
// binary (no fault VFS at all) is started on the same file: ready, every acknowledged credit there,
// the unacknowledged one wholly or not at all (a retry with its reference settles it), the refused
// ones absent, the audit clean.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "http/http_test_support.h"

namespace tollgate::httptest {
namespace {

std::string fault_server_binary() {
#ifdef TOLLGATE_FAULT_SERVER
  return TOLLGATE_FAULT_SERVER;
#else
  throw std::runtime_error("TOLLGATE_FAULT_SERVER is not defined for this target");
#endif
}

json::object credit(std::int64_t amount, const std::string& reference) {
  return json::object{{"amount", amount}, {"reference", reference}};
}

void create_account(HttpClient& admin, const std::string& id) {
  const HttpResponse created = admin.post("/v1/accounts", json::object{{"account_id", id}});
  ASSERT_EQ(created.status, 201u) << created;
}

std::int64_t purchased(HttpClient& admin, const std::string& id) {
  const HttpResponse account = admin.get("/v1/accounts/" + id);
  EXPECT_EQ(account.status, 200u) << account;
  return account.status == 200 ? jint(account.object(), "purchased") : -1;
}

void expect_clean_audit(HttpClient& admin) {
  const HttpResponse audit = admin.get("/v1/audit");
  ASSERT_EQ(audit.status, 200u) << audit;
  EXPECT_TRUE(audit.object().at("violations").as_array().empty()) << audit.body;
  EXPECT_GE(jint(audit.object(), "accounts_checked"), 1);
}

// The value of one sample line of /metrics ("name{labels} value"), or -1.
double metric(HttpClient& admin, const std::string& sample) {
  const HttpResponse r = admin.get("/metrics");
  EXPECT_EQ(r.status, 200u) << r;
  const auto at = r.body.find("\n" + sample + " ");
  if (at == std::string::npos) return -1;
  return std::strtod(r.body.c_str() + at + 1 + sample.size() + 1, nullptr);
}

// A tmpfs of `size_bytes` mounted on `dir` while the object lives.
class SmallVolume {
 public:
  SmallVolume(std::filesystem::path dir, std::int64_t size_bytes) : dir_(std::move(dir)) {
    std::filesystem::create_directories(dir_);
    const std::string data = "size=" + std::to_string(size_bytes) + ",mode=0755";
    if (::mount("tollgate-test", dir_.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, data.c_str()) != 0) {
      error_ = std::string("mount -t tmpfs on ") + dir_.string() + ": " + std::strerror(errno);
    } else {
      mounted_ = true;
    }
  }
  ~SmallVolume() {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  SmallVolume(const SmallVolume&) = delete;
  SmallVolume& operator=(const SmallVolume&) = delete;
  bool mounted() const { return mounted_; }
  const std::string& error() const { return error_; }
  std::string file(const std::string& name) const { return (dir_ / name).string(); }

 private:
  std::filesystem::path dir_;
  bool mounted_ = false;
  std::string error_;
};

// Writes `path` until the volume has no space left; the bytes written.
std::int64_t fill(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return 0;
  std::setvbuf(f, nullptr, _IONBF, 0);
  const std::string chunk(4096, 'x');
  std::int64_t written = 0;
  for (int i = 0; i < 1 << 20; ++i) {  // bounded: 4 GiB, far beyond the volume
    const std::size_t n = std::fwrite(chunk.data(), 1, chunk.size(), f);
    written += static_cast<std::int64_t>(n);
    if (n < chunk.size()) break;
  }
  std::fclose(f);
  return written;
}

bool root_tests_required() {
  const char* v = std::getenv("TOLLGATE_REQUIRE_ROOT_TESTS");
  return v != nullptr && std::string(v) == "1";
}

TEST(HttpStorageFaults, AFullVolumeAnswers503StorageFullKeepsReadsAndResumesWhenSpaceReturns) {
  if (::geteuid() != 0) {
    if (root_tests_required()) FAIL() << "TOLLGATE_REQUIRE_ROOT_TESTS=1 but not root: cannot mount a tmpfs";
    GTEST_SKIP() << "SKIPPED: mounting a small tmpfs needs root (CI runs as root with TOLLGATE_REQUIRE_ROOT_TESTS=1)";
  }
  testing::TempDir dir;
  SmallVolume volume(dir.path() / "volume", 8 << 20);
  ASSERT_TRUE(volume.mounted()) << volume.error();

  ServerOptions options = server_options();
  options.database = "sqlite:" + volume.file("ledger.db");
  ServerProcess server(options);
  ASSERT_EQ(wait_until_ready(server.port()).status, 200u);
  HttpClient admin(server.port(), kAdminKey);
  const std::string account = "acct-full";
  create_account(admin, account);
  std::map<std::string, std::int64_t> acknowledged;  // reference → amount
  for (int i = 0; i < 20; ++i) {
    const std::string ref = "before-" + std::to_string(i);
    const HttpResponse r = admin.post("/v1/accounts/" + account + "/credits", credit(10 + i, ref));
    ASSERT_EQ(r.status, 201u) << r;
    acknowledged[ref] = 10 + i;
  }

  const std::int64_t filler_bytes = fill(volume.file("filler"));
  ASSERT_GT(filler_bytes, 0);
  // Writes until the disk refuses them (a WAL restarted after a checkpoint may still take a few into
  // space it already has): each answer is 201 (acknowledged) or 503 storage_full, nothing else.
  std::vector<std::string> refused;
  int answered_full = 0;
  for (int i = 0; i < 400 && answered_full < 20; ++i) {
    const std::string ref = "during-" + std::to_string(i);
    const HttpResponse r = admin.post("/v1/accounts/" + account + "/credits", credit(5, ref));
    if (r.status == 201) {
      acknowledged[ref] = 5;
      continue;
    }
    ASSERT_TRUE(is_problem(r, 503, "storage_full")) << "after " << i << " writes on a full volume";
    ASSERT_TRUE(r.has_header("Retry-After")) << r;
    refused.push_back(ref);
    ++answered_full;
  }
  ASSERT_GE(answered_full, 1) << "the full volume never refused a write";
  std::printf("volume of 8 MiB: filler of %lld bytes; then %zu credits acknowledged, %d refused as storage_full\n",
              static_cast<long long>(filler_bytes), acknowledged.size() - 20, answered_full);
  // Reads answer the acknowledged state, and so does the audit; the server stays ready.
  std::int64_t acknowledged_sum = 0;
  for (const auto& [ref, amount] : acknowledged) acknowledged_sum += amount;
  EXPECT_EQ(purchased(admin, account), acknowledged_sum);
  EXPECT_EQ(admin.get("/v1/accounts/" + account + "/events?limit=10").status, 200u);
  expect_clean_audit(admin);
  EXPECT_EQ(admin.get("/readyz").status, 200u);
  EXPECT_GE(metric(admin, "tollgate_storage_failures_total{kind=\"disk_full\"}"), answered_full);

  // Space returns: the refused requests, retried with their references, are applied once.
  std::filesystem::remove(volume.file("filler"));
  for (const std::string& ref : refused) {
    const HttpResponse r = admin.post("/v1/accounts/" + account + "/credits", credit(5, ref));
    ASSERT_EQ(r.status, 201u) << ref << ": " << r;
    acknowledged[ref] = 5;
    acknowledged_sum += 5;
  }
  EXPECT_EQ(purchased(admin, account), acknowledged_sum);
  expect_clean_audit(admin);

  // A restart reads the same from the volume.
  server.restart();
  ASSERT_EQ(wait_until_ready(server.port()).status, 200u);
  HttpClient after(server.port(), kAdminKey);
  EXPECT_EQ(purchased(after, account), acknowledged_sum);
  for (const auto& [ref, amount] : acknowledged) {  // each one a replay: there, once
    const HttpResponse r = after.post("/v1/accounts/" + account + "/credits", credit(amount, ref));
    ASSERT_EQ(r.status, 200u) << ref << ": " << r;
  }
  EXPECT_EQ(purchased(after, account), acknowledged_sum);
  expect_clean_audit(after);
  server.stop();
}

std::string pg_script() {
  if (const char* s = std::getenv("TOLLGATE_PG_SCRIPT"); s && *s) return s;
  return std::string(TOLLGATE_SOURCE_DIR) + "/scripts/pg";
}

// PostgreSQL on a full volume: its own server (scripts/pg) with its data on a small tmpfs. An insert
// that must extend a table file fails with SQLSTATE 53100 ("could not extend file … No space left on
// device"), which tollgate answers as the same 503 storage_full; nothing of that batch is written
// (PostgreSQL rolls the transaction back), reads go on, and writes resume once space returns. (A WAL
// write that finds no space makes PostgreSQL itself stop — PANIC, then crash recovery —, which
// tollgate sees as a lost connection: see docs/operations/disk-faults.md.)
TEST(HttpStorageFaults, PostgresOnAFullVolumeAnswersTheSame503StorageFullAndResumes) {
  if (::geteuid() != 0) {
    if (root_tests_required()) FAIL() << "TOLLGATE_REQUIRE_ROOT_TESTS=1 but not root: cannot mount a tmpfs";
    GTEST_SKIP() << "SKIPPED: mounting a small tmpfs needs root (CI runs as root with TOLLGATE_REQUIRE_ROOT_TESTS=1)";
  }
  if (!testing::postgres_server_uri() && !testing::postgres_required()) {
    GTEST_SKIP() << "SKIPPED: no PostgreSQL in this run (set TOLLGATE_TEST_POSTGRES, as scripts/test does)";
  }
  char folder[] = "/tmp/tgsf-XXXXXX";  // short: the server's unix socket path must fit 107 bytes
  ASSERT_NE(::mkdtemp(folder), nullptr);
  struct Cleanup {  // the server stops before the volume goes, the folder last
    std::string dir;
    std::unique_ptr<SmallVolume> volume;
    bool started = false;
    ~Cleanup() {
      if (started) testing::run_process({pg_script(), "stop", dir}, {}, std::chrono::seconds(120));
      volume.reset();
      std::error_code ignored;
      std::filesystem::remove_all(dir, ignored);
    }
  } pg{folder, nullptr, false};
  // About 40 MiB after initdb (a 16 MiB WAL segment among it), the rest for the filler to take.
  pg.volume = std::make_unique<SmallVolume>(pg.dir, 96 << 20);
  ASSERT_TRUE(pg.volume->mounted()) << pg.volume->error();
  const ProcessResult started = testing::run_process({pg_script(), "start", pg.dir}, {}, std::chrono::seconds(120));
  ASSERT_EQ(started.exit_code, 0) << started.err << started.out;
  pg.started = true;
  const std::string uri = started.out.substr(0, started.out.find('\n'));

  ServerOptions options = server_options();
  options.database = uri;
  ServerProcess server(options);
  ASSERT_EQ(wait_until_ready(server.port()).status, 200u);
  HttpClient admin(server.port(), kAdminKey);
  const std::string account = "acct-pg-full";
  create_account(admin, account);
  std::int64_t acknowledged_sum = 0;
  for (int i = 0; i < 5; ++i) {
    const HttpResponse r = admin.post("/v1/accounts/" + account + "/credits", credit(10, "before-" + std::to_string(i)));
    ASSERT_EQ(r.status, 201u) << r;
    acknowledged_sum += 10;
  }

  ASSERT_GT(fill(pg.volume->file("filler")), 0);
  // Long references fill table pages fast: the first insert that needs a new page is refused.
  const std::string padding(100, 'p');
  std::vector<std::string> refused;
  int acknowledged_while_full = 0;
  for (int i = 0; i < 3000 && refused.size() < 5; ++i) {
    const std::string ref = "during-" + std::to_string(i) + "-" + padding;
    const HttpResponse r = admin.post("/v1/accounts/" + account + "/credits", credit(5, ref));
    if (r.status == 201) {
      acknowledged_sum += 5;
      ++acknowledged_while_full;
      continue;
    }
    ASSERT_TRUE(is_problem(r, 503, "storage_full")) << "after " << i << " writes on a full volume";
    // The caller is told what to do; the driver's words are in the log, under the request's id.
    EXPECT_NE(jstr(r.object(), "detail").find("disk is full"), std::string::npos) << r;
    EXPECT_EQ(r.body.find("No space left on device"), std::string::npos) << r;
    EXPECT_FALSE(jstr(r.object(), "request_id").empty()) << r;
    refused.push_back(ref);
  }
  ASSERT_FALSE(refused.empty()) << "PostgreSQL's full volume never refused a write";
  std::printf("PostgreSQL on a full 96 MiB volume: %d credits acknowledged into pages it had, %zu refused\n",
              acknowledged_while_full, refused.size());
  EXPECT_EQ(purchased(admin, account), acknowledged_sum);
  expect_clean_audit(admin);
  EXPECT_EQ(admin.get("/readyz").status, 200u);
  EXPECT_GE(metric(admin, "tollgate_storage_failures_total{kind=\"disk_full\"}"), 1);

  std::filesystem::remove(pg.volume->file("filler"));
  for (const std::string& ref : refused) {
    const HttpResponse r = admin.post("/v1/accounts/" + account + "/credits", credit(5, ref));
    ASSERT_EQ(r.status, 201u) << r;
    acknowledged_sum += 5;
  }
  EXPECT_EQ(purchased(admin, account), acknowledged_sum);
  expect_clean_audit(admin);
  server.stop();
}

TEST(HttpStorageFaults, AFailedFlushIsNeverAcknowledgedWritesStopAndNotReadyUntilARestartRecoversTheWal) {
  testing::TempDir faults;
  ServerOptions options = server_options();
  options.binary = fault_server_binary();
  options.env.emplace_back("TOLLGATE_FAULT_DIR", faults.path().string());
  ServerProcess faulty(options);
  ASSERT_EQ(wait_until_ready(faulty.port()).status, 200u);
  HttpClient admin(faulty.port(), kAdminKey);
  const std::string account = "acct-flush";
  create_account(admin, account);
  std::int64_t acknowledged_sum = 0;
  for (int i = 0; i < 10; ++i) {
    const HttpResponse r = admin.post("/v1/accounts/" + account + "/credits", credit(100, "ok-" + std::to_string(i)));
    ASSERT_EQ(r.status, 201u) << r;
    acknowledged_sum += 100;
  }

  // fsync answers EIO: the batch committed in SQLite but its flush failed — not acknowledged.
  { std::ofstream(faults.file("fail-sync")) << "on\n"; }
  const HttpResponse unflushed = admin.post("/v1/accounts/" + account + "/credits", credit(7, "unflushed"));
  ASSERT_TRUE(is_problem(unflushed, 503, "storage_failed")) << unflushed;
  std::filesystem::remove(faults.file("fail-sync"));

  // The disk works again, yet nothing more is written, and the server says it is not ready.
  const HttpResponse later = admin.post("/v1/accounts/" + account + "/credits", credit(3, "later"));
  EXPECT_TRUE(is_problem(later, 503, "storage_failed")) << later;
  const HttpResponse hold =
      admin.post("/v1/holds", json::object{{"account_id", account}, {"amount", 1}, {"request_id", "req-later"}});
  EXPECT_TRUE(is_problem(hold, 503, "storage_failed")) << hold;
  const HttpResponse ready = admin.get("/readyz");
  EXPECT_EQ(ready.status, 503u) << ready;
  EXPECT_NE(ready.body.find("restart"), std::string::npos) << ready;
  EXPECT_EQ(admin.get("/v1/accounts/" + account).status, 200u);  // reads still answer
  EXPECT_GE(metric(admin, "tollgate_storage_failures_total{kind=\"flush\"}"), 1);
  EXPECT_NE(faulty.log().find("refusing writes until tollgate is restarted"), std::string::npos) << faulty.log();
  const std::string database = faulty.database();
  EXPECT_NE(faulty.stop(), -1) << "the server did not stop on SIGTERM";

  // The real binary on the same file: WAL recovery, no fault VFS.
  ServerOptions plain = server_options();
  plain.database = database;
  ServerProcess server(plain);
  ASSERT_EQ(wait_until_ready(server.port()).status, 200u);
  HttpClient after(server.port(), kAdminKey);
  const std::int64_t recovered = purchased(after, account);
  EXPECT_TRUE(recovered == acknowledged_sum || recovered == acknowledged_sum + 7) << recovered;
  expect_clean_audit(after);
  for (int i = 0; i < 10; ++i) {  // every acknowledged credit: a replay
    const HttpResponse r = after.post("/v1/accounts/" + account + "/credits", credit(100, "ok-" + std::to_string(i)));
    EXPECT_EQ(r.status, 200u) << r;
  }
  // The client retries what it was not told was done: the unknown one is applied at most once, the
  // refused ones now.
  const HttpResponse retried = after.post("/v1/accounts/" + account + "/credits", credit(7, "unflushed"));
  EXPECT_EQ(retried.status, recovered == acknowledged_sum ? 201u : 200u) << retried;
  EXPECT_EQ(after.post("/v1/accounts/" + account + "/credits", credit(3, "later")).status, 201u);
  EXPECT_EQ(after.post("/v1/holds", json::object{{"account_id", account}, {"amount", 1}, {"request_id", "req-later"}})
                .status,
            201u);
  EXPECT_EQ(purchased(after, account), acknowledged_sum + 7 + 3);
  expect_clean_audit(after);
  server.stop();
}

}  // namespace
}  // namespace tollgate::httptest

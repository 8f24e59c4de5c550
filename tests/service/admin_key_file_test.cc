// The generated admin key handed over in a file (admin_key_file, --admin-key-file,
// TOLLGATE_ADMIN_KEY_FILE; service/admin_key_file.h), and systemd's readiness notification
// (service/sd_notify.h) — with real server processes, as the packaged unit runs them:
//   - the first start writes the key to the file, mode 0600, and prints it nowhere (stdout, log);
//     the key works; the log says where it is;
//   - a second start neither overwrites the file nor prints anything, and the key still works;
//   - a file left by a start that stopped before storing its key is adopted, not replaced;
//   - a file that is not a key, or a folder that does not exist, stops start-up with a clear error
//     and stores no key: the next start, fixed, generates one;
//   - without admin_key_file the key is printed as before (tests/service/admin_key_test.cc);
//   - with $NOTIFY_SOCKET set, the server sends READY=1 once it answers, STOPPING=1 when stopped.
#include <gtest/gtest.h>

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <sstream>

#include "config/config.h"
#include "http/http_test_support.h"

namespace tollgate::httptest {
namespace {

constexpr const char* kGeneratedKeyMarker = "generated admin key (shown once, stored hashed): ";

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class AdminKeyFile : public ::testing::Test {
 protected:
  ServerOptions options(const std::string& key_file) const {
    ServerOptions o;
    o.admin_key = "";  // none configured: the server generates one
    o.database = database_;
    o.extra_args = {"--admin-key-file", key_file};
    return o;
  }

  // The key's first line, as an operator reads it (`sudo cat /var/lib/tollgate/admin.key`).
  static std::string key_in(const std::string& path) {
    std::string text = slurp(path);
    return text.substr(0, text.find('\n'));
  }

  testing::TempDir dir_;
  std::string database_ = "sqlite:" + dir_.file("tollgate.db");
  std::string key_file_ = dir_.file("admin.key");
};

TEST_F(AdminKeyFile, TheFirstStartWritesTheKeyToA0600FileAndPrintsItNowhere) {
  ServerProcess server(options(key_file_));
  struct stat st {};
  ASSERT_EQ(::stat(key_file_.c_str(), &st), 0) << "no key file:\n" << server.log();
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(st.st_uid, ::geteuid());
  const std::string text = slurp(key_file_);
  const std::string key = key_in(key_file_);
  EXPECT_EQ(text, key + "\n") << "the file holds the key and a newline, nothing else";
  EXPECT_EQ(key.rfind("tgk_", 0), 0u) << key;

  EXPECT_EQ(server.output().find(kGeneratedKeyMarker), std::string::npos) << server.output();
  EXPECT_EQ(server.output().find(key), std::string::npos) << "the key is on stdout";
  EXPECT_EQ(server.log().find(key), std::string::npos) << "the key is in the log";
  EXPECT_NE(server.log().find("generated the admin key into " + key_file_ + " (mode 0600; it is not printed)"),
            std::string::npos)
      << server.log();

  // The key is the admin key: an account, credits, a hold reserved and committed.
  HttpClient admin(server.port(), key);
  ASSERT_EQ(admin.post("/v1/accounts", json::object{{"account_id", "kiosk"}}).status, 201u);
  ASSERT_EQ(admin.post("/v1/accounts/kiosk/credits", json::object{{"amount", 5}, {"reference", "buy-1"}}).status, 201u);
  const HttpResponse hold = admin.post("/v1/holds", json::object{{"account_id", "kiosk"}, {"amount", 3}, {"request_id", "r1"}});
  ASSERT_EQ(hold.status, 201u) << hold;
  EXPECT_EQ(admin.post("/v1/holds/" + jstr(hold.object(), "hold_id") + "/commit", json::object{}).status, 200u);
  EXPECT_TRUE(is_problem(HttpClient(server.port(), key + "x").get("/v1/accounts/kiosk"), 401, "unauthorized"));
}

TEST_F(AdminKeyFile, ASecondStartNeitherOverwritesTheFileNorPrintsAnything) {
  ServerProcess server(options(key_file_));
  const std::string key = key_in(key_file_);
  ASSERT_FALSE(key.empty()) << server.log();
  struct stat before {};
  ASSERT_EQ(::stat(key_file_.c_str(), &before), 0);
  ASSERT_EQ(server.stop(SIGTERM), 0) << server.log();
  const std::size_t log_before = server.log().size();

  server.restart();
  struct stat after {};
  ASSERT_EQ(::stat(key_file_.c_str(), &after), 0);
  EXPECT_EQ(after.st_ino, before.st_ino) << "the file was replaced";
  EXPECT_EQ(after.st_mtim.tv_sec, before.st_mtim.tv_sec);
  EXPECT_EQ(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec) << "the file was written again";
  EXPECT_EQ(key_in(key_file_), key);
  const std::string second_log = server.log().substr(log_before);
  EXPECT_EQ(second_log.find("admin key"), std::string::npos) << second_log;
  EXPECT_EQ(server.output(), "") << "nothing is printed on stdout, by either start";
  EXPECT_EQ(HttpClient(server.port(), key).post("/v1/accounts", json::object{{"account_id", "a"}}).status, 201u);
}

TEST_F(AdminKeyFile, AFileLeftByAStartThatStoredNoKeyIsAdoptedNotReplaced) {
  // What a start that stopped between writing the file and storing the key leaves behind.
  const std::string left = "tgk_left-by-a-start-that-stopped-0123456789";
  {
    std::ofstream out(key_file_);
    out << left << "\n";
  }
  ::chmod(key_file_.c_str(), 0600);
  ServerProcess server(options(key_file_));
  EXPECT_EQ(slurp(key_file_), left + "\n");
  EXPECT_NE(server.log().find("stored the admin key found in " + key_file_), std::string::npos) << server.log();
  EXPECT_EQ(server.log().find(left), std::string::npos);
  EXPECT_EQ(HttpClient(server.port(), left).post("/v1/accounts", json::object{{"account_id", "a"}}).status, 201u);
}

TEST_F(AdminKeyFile, AFileThatIsNotAKeyStopsStartUpAndNoKeyIsStored) {
  {
    std::ofstream out(key_file_);
    out << "short\n";
  }
  const ProcessResult r = testing::run_tollgate(
      {"serve", "--listen", "127.0.0.1:0", "--database", database_, "--admin-key-file", key_file_}, {},
      std::chrono::seconds(30));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("admin_key_file " + key_file_ + " does not hold a key on its first line"), std::string::npos)
      << r.err;
  EXPECT_EQ(slurp(key_file_), "short\n") << "the file was changed";
  // Nothing was stored: with the file removed, the next start generates the key.
  ASSERT_EQ(::unlink(key_file_.c_str()), 0);
  ServerProcess server(options(key_file_));
  EXPECT_EQ(HttpClient(server.port(), key_in(key_file_)).get("/v1/accounts/a").status, 404u);
}

TEST_F(AdminKeyFile, AFolderThatDoesNotExistStopsStartUpClearlyAndTheNextStartGeneratesTheKey) {
  const std::string nowhere = dir_.file("missing/admin.key");
  const ProcessResult r = testing::run_tollgate(
      {"serve", "--listen", "127.0.0.1:0", "--database", database_, "--admin-key-file", nowhere}, {},
      std::chrono::seconds(30));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("admin_key_file: cannot create " + nowhere + ": no such file or directory"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err.find("listening on"), std::string::npos) << r.err;

  ServerProcess server(options(key_file_));
  const std::string key = key_in(key_file_);
  EXPECT_EQ(HttpClient(server.port(), key).get("/v1/accounts/a").status, 404u) << "the key does not work";
}

TEST_F(AdminKeyFile, TheConfigurationFileAndTheEnvironmentSetItToo) {
  auto parsed = parse_config("admin_key_file = \"/var/lib/tollgate/admin.key\"\n", "tollgate.toml");
  ASSERT_TRUE(parsed) << parsed.error().detail;
  EXPECT_EQ(parsed->admin_key_file, "/var/lib/tollgate/admin.key");
  auto empty = parse_config("\nadmin_key_file = \"\"\n", "tollgate.toml");
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.error().detail, "tollgate.toml:2: admin_key_file must be a file's path (or be left out)");

  ServerOptions o;
  o.admin_key = "";
  o.database = database_;
  o.env = {{"TOLLGATE_ADMIN_KEY_FILE", key_file_}};
  ServerProcess server(o);
  EXPECT_EQ(server.output(), "");
  EXPECT_EQ(HttpClient(server.port(), key_in(key_file_)).get("/v1/accounts/a").status, 404u);
}

// systemd's readiness protocol, on the same fixture (a database in a temporary folder).
class SystemdNotify : public AdminKeyFile {};

// A unix datagram socket bound where systemd's would be, as $NOTIFY_SOCKET names it.
class NotifySocket {
 public:
  explicit NotifySocket(std::string address) : address_(std::move(address)) {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path, address_.data(), address_.size());
    socklen_t length = offsetof(sockaddr_un, sun_path) + address_.size() + 1;
    if (address_[0] == '@') {
      a.sun_path[0] = '\0';
      length -= 1;
    }
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&a), length), 0) << std::strerror(errno);
    timeval timeout{10, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  }
  ~NotifySocket() { ::close(fd_); }
  NotifySocket(const NotifySocket&) = delete;
  NotifySocket& operator=(const NotifySocket&) = delete;
  const std::string& address() const { return address_; }

  // The next datagram, or "" after 10 s without one.
  std::string receive() {
    char buffer[512];
    const ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
    return n > 0 ? std::string(buffer, static_cast<std::size_t>(n)) : std::string();
  }

 private:
  std::string address_;
  int fd_ = -1;
};

void expect_ready_then_stopping(NotifySocket& socket, const std::string& database) {
  ServerOptions o;
  o.database = database;
  o.env = {{"NOTIFY_SOCKET", socket.address()}};
  ServerProcess server(o);
  EXPECT_EQ(socket.receive(), "READY=1");
  EXPECT_EQ(HttpClient(server.port()).get("/healthz").status, 200u) << "READY=1 before the server answers";
  ASSERT_EQ(server.stop(SIGTERM), 0) << server.log();
  EXPECT_EQ(socket.receive(), "STOPPING=1");
  EXPECT_EQ(server.log().find("sd_notify"), std::string::npos) << server.log();
}

TEST_F(SystemdNotify, WithNotifySocketTheServerTellsSystemdItIsReadyAndWhenItStops) {
  NotifySocket socket(dir_.file("notify"));
  expect_ready_then_stopping(socket, database_);
}

TEST_F(SystemdNotify, AnAbstractNotifySocketIsReachedToo) {
  NotifySocket socket("@tollgate-test-notify-" + std::to_string(::getpid()));
  expect_ready_then_stopping(socket, database_);
}

TEST_F(SystemdNotify, ANotifySocketThatNobodyListensOnIsAWarningNotAFailure) {
  ServerOptions o;
  o.database = database_;
  o.env = {{"NOTIFY_SOCKET", dir_.file("nobody")}};
  ServerProcess server(o);
  EXPECT_EQ(HttpClient(server.port()).get("/healthz").status, 200u);
  EXPECT_NE(server.log().find("sd_notify: send to " + dir_.file("nobody")), std::string::npos) << server.log();
}

}  // namespace
}  // namespace tollgate::httptest

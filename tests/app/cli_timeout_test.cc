// --timeout-ms (issue 14): the CLI's client commands give up on a server that never answers after
// that total time, retries included — not after 4 attempts of 10 s each — with a clear message and
// exit 3; bad values are usage errors (exit 2) naming the flag, and nothing is sent. The client
// library's Options::call_timeout, which carries it, is checked on the same silent server.
//
// The silent server is a real listening socket on 127.0.0.1 whose thread accepts every connection
// and keeps it open without reading or answering.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/cli_output.h"
#include "support/server_process.h"
#include "tollgate/client.h"

namespace tollgate {
namespace {

using testing::describe;
using testing::ProcessResult;
using testing::run_tollgate;
using testing::ServerProcess;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Accepts connections and never answers (nor reads: the request sits in the socket's buffer).
class SilentServer {
 public:
  SilentServer() {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (listener_ < 0) throw std::runtime_error("socket");
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(listener_, 64) != 0) {
      throw std::runtime_error("bind/listen");
    }
    socklen_t len = sizeof addr;
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] {
      while (!stop_) {
        pollfd p{listener_, POLLIN, 0};
        if (::poll(&p, 1, 50) <= 0) continue;
        const int fd = ::accept(listener_, nullptr, nullptr);
        if (fd >= 0) {
          accepted_.push_back(fd);
          ++accepted_count_;
        }
      }
    });
  }
  ~SilentServer() {
    stop_ = true;
    thread_.join();
    for (int fd : accepted_) ::close(fd);
    ::close(listener_);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int accepted() const { return accepted_count_; }

 private:
  int listener_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_count_{0};
  std::vector<int> accepted_;  // touched by the thread only, then by the destructor after join
  std::thread thread_;
};

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(CliTimeout, ASilentServerIsGivenUpOnWithinTimeoutMsWithExitThree) {
  SilentServer silent;
  ProcessResult r = run_tollgate({"account", "show", "a", "--url", silent.url(), "--key", "k", "--timeout-ms", "800"});
  EXPECT_EQ(r.exit_code, 3) << describe(r);
  EXPECT_FALSE(r.timed_out);
  // Not before the bound (one attempt of up to 10 s was cut to it), and not long after it: the
  // process's start and exit only (without the flag: up to 4 × 12 s).
  EXPECT_GE(r.duration, milliseconds(800)) << describe(r);
  EXPECT_LT(r.duration, milliseconds(800 + 1500)) << describe(r);
  EXPECT_TRUE(contains(r.err, "tollgate: account show: cannot get an answer from " + silent.url())) << r.err;
  EXPECT_TRUE(contains(r.err, "within the call's time limit of 800 ms")) << r.err;
  EXPECT_TRUE(contains(r.err, "(--timeout-ms 800)")) << r.err;
  EXPECT_GE(silent.accepted(), 1);

  // A reserve too, and it still says how to retry without reserving twice.
  r = run_tollgate({"hold", "reserve", "a", "1", "--request-id", "kiosk-1", "--url", silent.url(), "--key", "k",
                    "--timeout-ms", "300"});
  EXPECT_EQ(r.exit_code, 3) << describe(r);
  EXPECT_GE(r.duration, milliseconds(300)) << describe(r);
  EXPECT_LT(r.duration, milliseconds(300 + 1500)) << describe(r);
  EXPECT_TRUE(contains(r.err, "time limit of 300 ms")) << r.err;
  EXPECT_TRUE(contains(r.err, "--request-id kiosk-1")) << r.err;
}

TEST(CliTimeout, TheBoundCoversRetriesWhenNothingListens) {
  // Refused connects are retried with back-off (0.1 + 0.2 + 0.4 s without a bound); 150 ms cuts
  // the retries short and ends the call within it.
  const std::string url = "http://127.0.0.1:" + std::to_string(testing::unused_port());
  const ProcessResult r = run_tollgate({"audit", "--url", url, "--key", "k", "--timeout-ms", "150"});
  EXPECT_EQ(r.exit_code, 3) << describe(r);
  EXPECT_LT(r.duration, milliseconds(150 + 1000)) << describe(r);
  EXPECT_TRUE(contains(r.err, "Connection refused")) << r.err;
  EXPECT_TRUE(contains(r.err, "the call's time limit of 150 ms ran out")) << r.err;
}

TEST(CliTimeout, JobWaitGivesUpOnASilentServerAfterItsTimeoutAndASecond) {
  SilentServer silent;
  const ProcessResult r =
      run_tollgate({"job", "wait", "j-1", "--url", silent.url(), "--key", "k", "--timeout-ms", "500"});
  EXPECT_EQ(r.exit_code, 3) << describe(r);
  EXPECT_LT(r.duration, milliseconds(500 + 1000 + 1500)) << describe(r);
  EXPECT_TRUE(contains(r.err, "time limit of 1500 ms")) << r.err;
}

TEST(CliTimeout, BadValuesAreUsageErrorsNamingTheFlagAndSendNothing) {
  SilentServer silent;
  for (const std::string value : {"0", "-1", "1.5", "abc", "", "3600001", "99999999999999999999", "1e3"}) {
    const ProcessResult r =
        run_tollgate({"account", "show", "a", "--url", silent.url(), "--key", "k", "--timeout-ms", value});
    EXPECT_EQ(r.exit_code, 2) << "'" << value << "'\n" << describe(r);
    EXPECT_TRUE(contains(r.err, "--timeout-ms")) << "'" << value << "'\n" << r.err;
    EXPECT_LT(r.duration, milliseconds(2000)) << describe(r);
  }
  const ProcessResult r = run_tollgate({"account", "show", "a", "--url", silent.url(), "--key", "k", "--timeout-ms", "0"});
  EXPECT_TRUE(contains(r.err, "must be an integer from 1 to 3600000, got \"0\"")) << r.err;
  std::this_thread::sleep_for(milliseconds(200));
  EXPECT_EQ(silent.accepted(), 0);  // nothing was sent
}

TEST(CliTimeout, ALiveServerAnswersWithinTheBoundAndTheHelpNamesTheFlag) {
  ServerProcess server;
  ProcessResult r = run_tollgate(
      {"account", "create", "t", "--url", server.url(), "--key", server.admin_key(), "--timeout-ms", "5000"});
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  r = run_tollgate({"audit", "--url", server.url(), "--key", server.admin_key(), "--timeout-ms", "5000"});
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  r = run_tollgate({"hold", "reserve", "--help"});
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_TRUE(contains(r.out, "--timeout-ms")) << r.out;
  r = run_tollgate({"--help"});
  EXPECT_TRUE(contains(r.out, "--timeout-ms N")) << r.out;
}

TEST(ClientCallTimeout, BoundsTheWholeCallOnASilentServer) {
  SilentServer silent;
  client::Options o;
  o.base_url = silent.url();
  o.key = "k";
  o.call_timeout = milliseconds(400);  // request_timeout stays 10 s, attempts_max 4
  client::Client c(o);
  const auto started = Clock::now();
  const auto r = c.get_account("a");
  const auto took = Clock::now() - started;
  ASSERT_TRUE(r.is_transport_error()) << r.describe();
  EXPECT_EQ(r.transport_error().failure, client::TransportFailure::timeout);
  EXPECT_TRUE(contains(r.transport_error().message, "time limit of 400 ms")) << r.transport_error().message;
  EXPECT_GE(took, milliseconds(400));
  EXPECT_LT(took, milliseconds(1500));  // 400 ms and a loaded machine's scheduling (sanitizer builds)
  EXPECT_EQ(r.attempts(), 1);

  // The next call has its own 400 ms (the limit is per call).
  const auto again = c.get_account("a");
  ASSERT_TRUE(again.is_transport_error());
  EXPECT_EQ(again.transport_error().failure, client::TransportFailure::timeout);

  // A negative limit is a configuration error: nothing is sent.
  o.call_timeout = milliseconds(-1);
  EXPECT_NE(client::Client(o).configuration_error(), nullptr);
}

}  // namespace
}  // namespace tollgate

// HEAD on every GET route, from a real server over raw sockets: the GET's status and headers
// (Content-Length included), no body — so the next answer on the same connection starts right
// after the head — and HEAD listed in Allow where GET is.
#include <gtest/gtest.h>

#include "http/http_test_support.h"

namespace tollgate::httptest {
namespace {

class HttpHead : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new ServerProcess(server_options()); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  static inline ServerProcess* server_ = nullptr;
};

// The value of a header in a raw response's head ("" when absent), by case-insensitive name.
std::string raw_header(const std::string& head, std::string name) {
  std::string lower = head;
  for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const auto at = lower.find("\r\n" + name + ":");
  if (at == std::string::npos) return "";
  const auto start = head.find_first_not_of(' ', at + 2 + name.size() + 1);
  return head.substr(start, head.find("\r\n", start) - start);
}

// Sends `method target` then GET /healthz on one kept-alive connection, and returns both answers'
// bytes as they came (the second closes the connection).
std::string two_on_one_connection(std::uint16_t port, const std::string& method, const std::string& target,
                                  const std::string& key = "") {
  RawConnection c(port);
  std::string first = method + " " + target + " HTTP/1.1\r\nHost: localhost\r\n";
  if (!key.empty()) first += "Authorization: Bearer " + key + "\r\n";
  first += "\r\n";
  EXPECT_TRUE(c.send(first));
  EXPECT_TRUE(c.send("GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"));
  return c.read_until_closed(kPatience);
}

TEST_F(HttpHead, HeadOfAGetRouteHasTheGetsHeadersAndNoBody) {
  HttpClient anonymous(server_->port());
  for (const char* target : {"/console", "/console/app.js", "/healthz", "/openapi.json"}) {
    const HttpResponse get = anonymous.get(target);
    ASSERT_EQ(get.status, 200u) << target << ": " << get;
    const std::string both = two_on_one_connection(server_->port(), "HEAD", target);
    const auto head_end = both.find("\r\n\r\n");
    ASSERT_NE(head_end, std::string::npos) << target << ": " << both;
    const std::string head = both.substr(0, head_end);
    EXPECT_EQ(raw_status(both), 200u) << target << ": " << head;
    EXPECT_EQ(raw_header(head, "Content-Length"), std::to_string(get.body.size())) << target;
    EXPECT_EQ(raw_header(head, "Content-Type"), get.header("Content-Type")) << target;
    EXPECT_EQ(raw_header(head, "ETag"), get.header("ETag")) << target;
    EXPECT_EQ(raw_header(head, "Content-Security-Policy"), get.header("Content-Security-Policy")) << target;
    // No body: the next answer on the connection follows the head at once.
    const std::string rest = both.substr(head_end + 4);
    EXPECT_EQ(rest.rfind("HTTP/1.1 200 ", 0), 0u) << target << ": after the head came " << rest.substr(0, 80);
    EXPECT_NE(rest.find("\"ok\""), std::string::npos) << rest;
  }
}

TEST_F(HttpHead, HeadOfAnAdminRouteNeedsTheKeyLikeItsGet) {
  const std::string refused = two_on_one_connection(server_->port(), "HEAD", "/v1/accounts");
  EXPECT_EQ(raw_status(refused), 401u) << refused;
  EXPECT_EQ(raw_body(refused).rfind("HTTP/1.1 200 ", 0), 0u) << "a 401 to HEAD has no body: " << refused;
  const std::string admitted = two_on_one_connection(server_->port(), "HEAD", "/v1/accounts?limit=1", server_->admin_key());
  EXPECT_EQ(raw_status(admitted), 200u) << admitted;
  const auto head_end = admitted.find("\r\n\r\n");
  EXPECT_NE(raw_header(admitted.substr(0, head_end), "Content-Length"), "0");
  EXPECT_EQ(raw_body(admitted).rfind("HTTP/1.1 200 ", 0), 0u) << admitted;
}

TEST_F(HttpHead, AllowNamesHeadWhereGetIsAndHeadIsRefusedWhereGetIsNot) {
  HttpClient admin(server_->port(), server_->admin_key());
  // A route with GET: a method it does not have lists GET and HEAD.
  const HttpResponse wrong = admin.request("PUT", "/v1/accounts", "");
  EXPECT_TRUE(is_problem(wrong, 405, "method_not_allowed")) << wrong;
  EXPECT_NE(wrong.header("Allow").find("GET, HEAD"), std::string::npos) << wrong.header("Allow");
  // A route without GET (POST only): HEAD is 405 too, and Allow does not offer HEAD.
  const std::string post_only = two_on_one_connection(server_->port(), "HEAD", "/v1/holds/h-1/commit", server_->admin_key());
  EXPECT_EQ(raw_status(post_only), 405u) << post_only;
  const std::string head = post_only.substr(0, post_only.find("\r\n\r\n"));
  EXPECT_EQ(raw_header(head, "Allow"), "POST") << head;
  EXPECT_EQ(raw_body(post_only).rfind("HTTP/1.1 200 ", 0), 0u) << post_only;
}

}  // namespace
}  // namespace tollgate::httptest

// The provider contract (api.md, "What tollgate sends a provider"), row by row: what each answer of
// a send and of a status question makes a worker do next (jobs/provider_protocol.h).
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "jobs/provider_protocol.h"

namespace tollgate::jobs {
namespace {

namespace json = boost::json;
using Kind = Exchange::Kind;

Exchange answered(unsigned status, std::string body = "") { return Exchange{Kind::answered, status, std::move(body)}; }
Exchange transport(Kind kind) { return Exchange{kind, 0, ""}; }

TEST(ProviderProtocol, TheRequestBodyCarriesTheIdAndTheInputAsGiven) {
  const json::value body = json::parse(request_body("kiosk-7:guest-3", R"({"prompt":"a cat","n":1})"));
  EXPECT_EQ(body, json::parse(R"({"id":"kiosk-7:guest-3","input":{"prompt":"a cat","n":1}})"));
  EXPECT_EQ(json::parse(request_body("a", "null")), json::parse(R"({"id":"a","input":null})"));
}

TEST(ProviderProtocol, TheStatusUrlNamesTheJobPercentEncodedWhereTheTemplateSaysId) {
  EXPECT_EQ(status_url_for("http://p:9000/status/{id}", "job-1"), "http://p:9000/status/job-1");
  EXPECT_EQ(status_url_for("http://p/s/{id}?again={id}", "a b/c"), "http://p/s/a%20b%2Fc?again=a%20b%2Fc");
  EXPECT_EQ(status_url_for("http://p/status", "x"), "http://p/status");
}

TEST(ProviderProtocol, A2xxWithAResultCompletesWithThatResult) {
  for (unsigned status : {200u, 201u, 202u, 299u}) {
    const Decision d = after_send(answered(status, R"({"result":{"url":"img/1.png"},"extra":1})"), true, 1, 3);
    EXPECT_EQ(d.next, Next::complete) << status;
    EXPECT_EQ(json::parse(d.result_json), json::parse(R"({"url":"img/1.png"})"));
  }
}

TEST(ProviderProtocol, A2xxWithoutAReadableResultIsUnknownNeverAFailure) {
  // It said success: it may have done and billed the work, so the hold must not be released on a guess.
  for (const char* body : {"", "not json", "[]", R"({"result":"a string"})", R"({"status":"ok"})"}) {
    EXPECT_EQ(after_send(answered(200, body), true, 1, 3).next, Next::ask_status) << body;
    EXPECT_EQ(after_send(answered(200, body), false, 1, 3).next, Next::send_again) << body;
    EXPECT_EQ(after_send(answered(200, body), false, 3, 3).next, Next::fail) << body;
  }
}

TEST(ProviderProtocol, A4xxFailsAtOnceWhateverAttemptsRemain) {
  for (unsigned status : {400u, 401u, 404u, 409u, 422u, 429u, 499u}) {
    const Decision d = after_send(answered(status, R"({"result":{}})"), true, 1, 3);
    EXPECT_EQ(d.next, Next::fail) << status;
    EXPECT_NE(d.reason.find("HTTP " + std::to_string(status)), std::string::npos) << d.reason;
  }
}

TEST(ProviderProtocol, AnUnknownOutcomeAsksTheStatusUrlWhenThereIsOne) {
  for (const Exchange& e : {answered(500), answered(503), answered(302), answered(100), transport(Kind::timed_out),
                            transport(Kind::connection_lost)}) {
    // On every attempt, also the last: asking is never a guess.
    EXPECT_EQ(after_send(e, true, 1, 3).next, Next::ask_status);
    EXPECT_EQ(after_send(e, true, 3, 3).next, Next::ask_status);
  }
}

TEST(ProviderProtocol, WithoutAStatusUrlAnUnknownOutcomeIsSentAgainThenFailsAfterTheLastAttempt) {
  for (const Exchange& e : {answered(500), transport(Kind::timed_out), transport(Kind::connection_lost)}) {
    EXPECT_EQ(after_send(e, false, 1, 3).next, Next::send_again);
    EXPECT_EQ(after_send(e, false, 2, 3).next, Next::send_again);
    const Decision last = after_send(e, false, 3, 3);
    EXPECT_EQ(last.next, Next::fail);
    EXPECT_NE(last.reason.find("after 3 attempts"), std::string::npos) << last.reason;
  }
  EXPECT_EQ(after_send(answered(502), false, 1, 1).next, Next::fail);
}

TEST(ProviderProtocol, ARequestThatWasNeverSentIsSentAgainEvenWithAStatusUrl) {
  EXPECT_EQ(after_send(transport(Kind::not_connected), true, 1, 3).next, Next::send_again);
  EXPECT_EQ(after_send(transport(Kind::not_connected), true, 3, 3).next, Next::fail);
}

TEST(ProviderProtocol, TheStatusUrlSettlesCompletedAndFailed) {
  Decision d = after_status(answered(200, R"({"status":"completed","result":{"url":"x"}})"), 1, 3);
  EXPECT_EQ(d.next, Next::complete);
  EXPECT_EQ(json::parse(d.result_json), json::parse(R"({"url":"x"})"));
  d = after_status(answered(200, R"({"status":"failed","error":{"message":"nsfw"}})"), 1, 3);
  EXPECT_EQ(d.next, Next::fail);
  EXPECT_NE(d.reason.find("nsfw"), std::string::npos) << d.reason;
}

TEST(ProviderProtocol, RunningOrAnythingTheStatusUrlCannotSayYetIsAskedAgain) {
  for (const Exchange& e :
       {answered(200, R"({"status":"running"})"), answered(200, R"({"status":"completed"})"),  // no result yet
        answered(200, "garbage"), answered(200, R"({"status":7})"), answered(500), answered(503), answered(401),
        transport(Kind::timed_out), transport(Kind::connection_lost), transport(Kind::not_connected)}) {
    EXPECT_EQ(after_status(e, 3, 3).next, Next::ask_status) << e.status << " " << e.body;
  }
}

TEST(ProviderProtocol, A404FromTheStatusUrlMeansNeverReceivedSoItIsSafeToSendAgain) {
  EXPECT_EQ(after_status(answered(404), 1, 3).next, Next::send_again);
  EXPECT_EQ(after_status(answered(404), 2, 3).next, Next::send_again);
  EXPECT_EQ(after_status(answered(404), 3, 3).next, Next::fail);
}

TEST(ProviderProtocol, StatusQuestionsBackOffFromAQuarterSecondToTenSecondsSpreadByJitter) {
  using std::chrono::milliseconds;
  EXPECT_EQ(status_poll_delay(1, 0.0), milliseconds(125));
  EXPECT_EQ(status_poll_delay(1, 0.999), milliseconds(249));
  EXPECT_EQ(status_poll_delay(2, 0.0), milliseconds(250));
  EXPECT_EQ(status_poll_delay(3, 0.0), milliseconds(500));
  EXPECT_EQ(status_poll_delay(7, 0.0), milliseconds(5'000));
  EXPECT_EQ(status_poll_delay(8, 0.0), milliseconds(5'000));  // 10 s, the ceiling, spread over [5, 10] s
  EXPECT_EQ(status_poll_delay(1'000'000, 0.5), milliseconds(7'500));
  for (int q = 1; q < 40; ++q) EXPECT_LE(status_poll_delay(q, 0.999), milliseconds(10'000));
}

}  // namespace
}  // namespace tollgate::jobs

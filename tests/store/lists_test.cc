// The paged lists and lookups (store/lists.h) and the last use of API keys (ledger/key_use.h), on
// every backend, through the Ledger: paging with limit / starting_after / has_more, cursors that
// name no item, lookups found and not found, keys listed without secrets — and paging through
// 10,000 accounts and 10,000 holds while another thread keeps writing, each item seen exactly once.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <latch>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "slices.h"
#include "core/limits.h"
#include "ledger/ledger.h"
#include "store/lists.h"
#include "store/store.h"
#include "support/backends.h"

namespace tollgate {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

#define ASSERT_OK(r) ASSERT_TRUE((r).ok()) << (r).error().detail
#define EXPECT_CODE(r, c) EXPECT_EQ(code_name((r).code()), code_name(c))

constexpr std::int64_t kTtl = 60'000;

class Lists : public ::testing::TestWithParam<testing::StoreBackend> {
 protected:
  void SetUp() override {
    store_ = GetParam().open_fresh(clock_);
    ASSERT_NE(store_, nullptr);
    LedgerOptions options;
    options.reaper_interval_ms = 0;
    options.key_use_flush_interval_ms = 0;  // the tests flush
    ledger_ = std::make_unique<Ledger>(*store_, clock_, options);
  }
  void TearDown() override {
    ledger_.reset();
    store_.reset();
  }

  void make_account(const std::string& id) { ASSERT_OK(ledger_->create_account({id, 0, std::nullopt})); }
  void give(const std::string& id, std::int64_t amount, const std::string& reference) {
    ASSERT_OK(ledger_->credit({id, amount, reference}));
  }
  std::string hold(const std::string& account, const std::string& request, std::int64_t ttl = kTtl) {
    auto r = ledger_->reserve({account, 1, request, ttl, "", ""});
    EXPECT_TRUE(r.ok()) << r.error().detail;
    return r.ok() ? r->hold.hold_id : "";
  }
  void make_key(const std::string& key_id, std::optional<std::string> account) {
    ASSERT_OK(ledger_->run(CreateKeyCommand{key_id, std::move(account), (key_id + std::string(64, '0')).substr(0, 64)}));
  }

  template <typename T>
  static std::vector<std::string> ids(const Page<T>& page, std::string (*id)(const T&)) {
    std::vector<std::string> out;
    for (const T& item : page.items) out.push_back(id(item));
    return out;
  }
  static std::string account_id(const Account& a) { return a.account_id; }
  static std::string hold_id(const Hold& h) { return h.hold_id; }
  static std::string key_id(const KeySummary& k) { return k.key_id; }

  ManualClock clock_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Ledger> ledger_;
};

// --- accounts ------------------------------------------------------------------------------------

TEST_P(Lists, AccountsComeByIdAscendingInPagesThatSayWhetherMoreFollow) {
  for (const char* id : {"carol", "alice", "erin", "bob", "dave"}) make_account(id);
  auto first = ledger_->list_accounts({2});
  ASSERT_OK(first);
  EXPECT_THAT(ids(*first, account_id), ElementsAre("alice", "bob"));
  EXPECT_TRUE(first->has_more);
  auto second = ledger_->list_accounts({2, "bob"});
  ASSERT_OK(second);
  EXPECT_THAT(ids(*second, account_id), ElementsAre("carol", "dave"));
  EXPECT_TRUE(second->has_more);
  auto last = ledger_->list_accounts({2, "dave"});
  ASSERT_OK(last);
  EXPECT_THAT(ids(*last, account_id), ElementsAre("erin"));
  EXPECT_FALSE(last->has_more);
  auto exact = ledger_->list_accounts({5});  // exactly as many as exist: nothing more
  ASSERT_OK(exact);
  EXPECT_EQ(exact->items.size(), 5u);
  EXPECT_FALSE(exact->has_more);
}

TEST_P(Lists, ListedAccountsAreTheFullAccountsAsAReaderSeesThem) {
  make_account("alice");
  give("alice", 10, "ref-1");
  hold("alice", "req-1", 1000);
  hold("alice", "req-2", kTtl);
  clock_.advance_ms(1000);  // req-1 is overdue, not reaped: its credit reads as available again
  auto page = ledger_->list_accounts({});
  ASSERT_OK(page);
  ASSERT_EQ(page->items.size(), 1u);
  auto alone = ledger_->get_account("alice");
  ASSERT_OK(alone);
  EXPECT_EQ(page->items[0], *alone);
  EXPECT_EQ(page->items[0].balances.available, 9);
  EXPECT_EQ(page->items[0].active_holds, 1);
}

TEST_P(Lists, AnEmptyLedgerListsNothing) {
  auto page = ledger_->list_accounts({});
  ASSERT_OK(page);
  EXPECT_THAT(page->items, IsEmpty());
  EXPECT_FALSE(page->has_more);
}

TEST_P(Lists, AStartingAfterThatIsNoAccountIsRefusedNamingIt) {
  make_account("alice");
  auto r = ledger_->list_accounts({10, "nobody"});
  EXPECT_CODE(r, Code::invalid_request);
  EXPECT_THAT(r.error().detail, HasSubstr("starting_after"));
  EXPECT_THAT(r.error().detail, HasSubstr("nobody"));
  EXPECT_CODE(ledger_->list_accounts({10, "not an id!"}), Code::invalid_request);
}

TEST_P(Lists, EveryListTakesALimitFromOneTo1000) {
  make_account("alice");
  for (std::int64_t bad : {std::int64_t{0}, std::int64_t{-1}, limits::kListPageMax + 1}) {
    auto accounts = ledger_->list_accounts({bad});
    EXPECT_CODE(accounts, Code::invalid_request);
    if (!accounts.ok()) {
      EXPECT_THAT(accounts.error().detail, HasSubstr("limit"));
    }
    EXPECT_CODE(ledger_->list_holds({}, {bad}), Code::invalid_request);
    EXPECT_CODE(ledger_->list_keys(std::nullopt, {bad}), Code::invalid_request);
  }
  EXPECT_TRUE(ledger_->list_accounts({1}).ok());
  EXPECT_TRUE(ledger_->list_holds({}, {limits::kListPageMax}).ok());
  EXPECT_TRUE(ledger_->list_keys(std::nullopt, {limits::kListPageMax}).ok());
}

// --- holds ---------------------------------------------------------------------------------------

TEST_P(Lists, HoldsComeNewestFirstInPagesAfterTheLastOneSeen) {
  make_account("alice");
  give("alice", 10, "ref-1");
  std::vector<std::string> made;
  for (int i = 0; i < 5; ++i) made.push_back(hold("alice", "req-" + std::to_string(i)));
  auto first = ledger_->list_holds({"alice"}, {2});
  ASSERT_OK(first);
  EXPECT_THAT(ids(*first, hold_id), ElementsAre(made[4], made[3]));
  EXPECT_TRUE(first->has_more);
  auto second = ledger_->list_holds({"alice"}, {2, made[3]});
  ASSERT_OK(second);
  EXPECT_THAT(ids(*second, hold_id), ElementsAre(made[2], made[1]));
  EXPECT_TRUE(second->has_more);
  auto last = ledger_->list_holds({"alice"}, {2, made[1]});
  ASSERT_OK(last);
  EXPECT_THAT(ids(*last, hold_id), ElementsAre(made[0]));
  EXPECT_FALSE(last->has_more);
}

TEST_P(Lists, HoldsPagedByStatusStayInOrderAndSkipTheOthers) {
  make_account("alice");
  give("alice", 10, "ref-1");
  const std::string a1 = hold("alice", "req-1");
  const std::string r1 = hold("alice", "req-2");
  const std::string a2 = hold("alice", "req-3");
  const std::string x1 = hold("alice", "req-4", 1000);
  const std::string a3 = hold("alice", "req-5");
  ASSERT_OK(ledger_->release({r1}));
  clock_.advance_ms(1000);  // x1 reads as expired
  auto first = ledger_->list_holds({"alice", HoldStatus::active}, {2});
  ASSERT_OK(first);
  EXPECT_THAT(ids(*first, hold_id), ElementsAre(a3, a2));
  EXPECT_TRUE(first->has_more);
  auto rest = ledger_->list_holds({"alice", HoldStatus::active}, {2, a2});
  ASSERT_OK(rest);
  EXPECT_THAT(ids(*rest, hold_id), ElementsAre(a1));
  EXPECT_FALSE(rest->has_more);
  auto expired = ledger_->list_holds({"alice", HoldStatus::expired}, {});
  ASSERT_OK(expired);
  EXPECT_THAT(ids(*expired, hold_id), ElementsAre(x1));
  auto released = ledger_->list_holds({std::nullopt, HoldStatus::released}, {});
  ASSERT_OK(released);
  EXPECT_THAT(ids(*released, hold_id), ElementsAre(r1));
}

TEST_P(Lists, AHoldIsFoundByItsRequestIdAndAnUnknownRequestListsNothing) {
  make_account("alice");
  make_account("bob");
  give("alice", 10, "ref-1");
  hold("alice", "req-1");
  const std::string wanted = hold("alice", "req-2");
  auto found = ledger_->list_holds({std::nullopt, std::nullopt, "req-2"}, {});
  ASSERT_OK(found);
  EXPECT_THAT(ids(*found, hold_id), ElementsAre(wanted));
  EXPECT_FALSE(found->has_more);
  auto of_alice = ledger_->list_holds({"alice", std::nullopt, "req-2"}, {});
  ASSERT_OK(of_alice);
  EXPECT_THAT(ids(*of_alice, hold_id), ElementsAre(wanted));
  auto of_bob = ledger_->list_holds({"bob", std::nullopt, "req-2"}, {});  // another account's: nothing
  ASSERT_OK(of_bob);
  EXPECT_THAT(of_bob->items, IsEmpty());
  auto unknown = ledger_->list_holds({std::nullopt, std::nullopt, "req-never"}, {});
  ASSERT_OK(unknown);
  EXPECT_THAT(unknown->items, IsEmpty());
  EXPECT_CODE(ledger_->list_holds({std::nullopt, std::nullopt, "bad id!"}, {}), Code::invalid_request);
}

TEST_P(Lists, AHoldCursorMustBeAHoldOfTheListedAccount) {
  make_account("alice");
  make_account("bob");
  give("alice", 10, "ref-1");
  give("bob", 10, "ref-2");
  const std::string of_alice = hold("alice", "req-1");
  const std::string of_bob = hold("bob", "req-2");
  auto other = ledger_->list_holds({"alice"}, {10, of_bob});
  EXPECT_CODE(other, Code::invalid_request);
  if (!other.ok()) {
    EXPECT_THAT(other.error().detail, HasSubstr("starting_after"));
  }
  EXPECT_CODE(ledger_->list_holds({}, {10, "hold_999_abc"}), Code::invalid_request);
  // A well-formed id whose random part does not match is no hold either.
  EXPECT_CODE(ledger_->list_holds({}, {10, of_alice + "0"}), Code::invalid_request);
  auto all = ledger_->list_holds({}, {10, of_bob});  // every account's list: bob's hold is in it
  ASSERT_OK(all);
  EXPECT_THAT(ids(*all, hold_id), ElementsAre(of_alice));
  EXPECT_CODE(ledger_->list_holds({"nobody"}, {}), Code::not_found);
}

// --- keys ----------------------------------------------------------------------------------------

TEST_P(Lists, KeysComeNewestFirstOfOneAccountOrAllWithoutSecrets) {
  make_account("alice");
  make_account("bob");
  make_key("key_admin", std::nullopt);
  clock_.advance_ms(1);
  make_key("key_a1", "alice");
  clock_.advance_ms(1);
  make_key("key_b1", "bob");
  make_key("key_a2", "alice");  // same millisecond as key_b1: the id decides, descending
  ASSERT_OK(ledger_->run(RevokeKeyCommand{"key_a1"}));

  auto all = ledger_->list_keys(std::nullopt, {});
  ASSERT_OK(all);
  EXPECT_THAT(ids(*all, key_id), ElementsAre("key_b1", "key_a2", "key_a1", "key_admin"));
  EXPECT_FALSE(all->has_more);
  const KeySummary& admin = all->items[3];
  EXPECT_FALSE(admin.account_id.has_value());
  EXPECT_EQ(admin.created_at_ms, clock_.now_ms() - 2);
  EXPECT_FALSE(admin.revoked_at_ms.has_value());
  EXPECT_EQ(all->items[2].revoked_at_ms, clock_.now_ms());
  EXPECT_FALSE(all->items[2].last_used_at_ms.has_value());

  auto of_alice = ledger_->list_keys("alice", {1});
  ASSERT_OK(of_alice);
  EXPECT_THAT(ids(*of_alice, key_id), ElementsAre("key_a2"));
  EXPECT_TRUE(of_alice->has_more);
  auto more = ledger_->list_keys("alice", {1, "key_a2"});
  ASSERT_OK(more);
  EXPECT_THAT(ids(*more, key_id), ElementsAre("key_a1"));
  EXPECT_FALSE(more->has_more);

  auto paged = ledger_->list_keys(std::nullopt, {2, "key_a2"});
  ASSERT_OK(paged);
  EXPECT_THAT(ids(*paged, key_id), ElementsAre("key_a1", "key_admin"));
  EXPECT_FALSE(paged->has_more);
}

TEST_P(Lists, AKeyCursorMustBeAKeyOfTheListAndTheAccountMustExist) {
  make_account("alice");
  make_account("bob");
  make_key("key_a1", "alice");
  make_key("key_b1", "bob");
  EXPECT_CODE(ledger_->list_keys("alice", {10, "key_b1"}), Code::invalid_request);
  EXPECT_CODE(ledger_->list_keys(std::nullopt, {10, "key_none"}), Code::invalid_request);
  EXPECT_CODE(ledger_->list_keys("nobody", {}), Code::not_found);
  auto none = ledger_->list_keys(std::nullopt, {10, "key_a1"});
  ASSERT_OK(none);
}

// --- transfers -----------------------------------------------------------------------------------

TEST_P(Lists, ACreditOrDebitIsFoundByItsReference) {
  make_account("alice");
  clock_.advance_ms(5);
  auto credited = ledger_->credit({"alice", 10, "pay-1"});
  ASSERT_OK(credited);
  clock_.advance_ms(5);
  auto debited = ledger_->debit({"alice", 3, "refund-1", "a refund"});
  ASSERT_OK(debited);

  auto credit = ledger_->get_transfer("pay-1");
  ASSERT_OK(credit);
  EXPECT_EQ(credit->transfer.reference, "pay-1");
  EXPECT_EQ(credit->transfer.account_id, "alice");
  EXPECT_EQ(credit->transfer.kind, EventType::credited);
  EXPECT_EQ(credit->transfer.amount, 10);
  EXPECT_EQ(credit->event, credited->event);

  auto debit = ledger_->get_transfer("refund-1");
  ASSERT_OK(debit);
  EXPECT_EQ(debit->transfer.kind, EventType::debited);
  EXPECT_EQ(debit->transfer.amount, 3);
  EXPECT_EQ(debit->transfer.reason, "a refund");
  EXPECT_EQ(debit->event.event_id, debited->event.event_id);
  EXPECT_EQ(debit->event.at_ms, clock_.now_ms());

  EXPECT_CODE(ledger_->get_transfer("pay-never"), Code::not_found);
  EXPECT_CODE(ledger_->get_transfer("bad reference!"), Code::invalid_request);
}

// --- the last use of a key -----------------------------------------------------------------------

std::optional<std::int64_t> last_used(Ledger& ledger, const std::string& key) {
  auto page = ledger.list_keys(std::nullopt, {limits::kListPageMax});
  if (!page.ok()) return std::nullopt;
  for (const KeySummary& k : page->items) {
    if (k.key_id == key) return k.last_used_at_ms;
  }
  return std::nullopt;
}

TEST_P(Lists, ManyUsesOfAKeyAreWrittenAsOneUpdateCarryingTheLatest) {
  make_account("alice");
  make_key("key_a1", "alice");
  make_key("key_a2", "alice");
  const std::uint64_t commands_before = ledger_->write_stats().commands;
  for (int i = 0; i < 1000; ++i) {
    ledger_->key_uses().record("key_a1");
    if (i % 100 == 0) ledger_->key_uses().record("key_a2");
    clock_.advance_ms(1);
  }
  const std::int64_t last_a1 = clock_.now_ms() - 1;
  EXPECT_EQ(ledger_->write_stats().commands, commands_before) << "a use writes nothing by itself";
  EXPECT_EQ(ledger_->key_uses().pending(), 2u);
  EXPECT_EQ(last_used(*ledger_, "key_a1"), std::nullopt) << "not written before the flush";

  ASSERT_OK(ledger_->key_uses().flush());
  EXPECT_EQ(ledger_->write_stats().commands, commands_before + 1) << "one command for both keys";
  EXPECT_EQ(ledger_->key_uses().pending(), 0u);
  EXPECT_EQ(last_used(*ledger_, "key_a1"), last_a1);
  EXPECT_EQ(last_used(*ledger_, "key_a2"), last_a1 - 99);

  ASSERT_OK(ledger_->key_uses().flush());  // nothing new: no write at all
  EXPECT_EQ(ledger_->write_stats().commands, commands_before + 1);
}

TEST_P(Lists, ALastUseOnlyMovesForwardAndAKeyThatIsNotStoredIsSkipped) {
  make_account("alice");
  make_key("key_a1", "alice");
  const std::int64_t now = clock_.now_ms();
  auto first = ledger_->run(RecordKeyUseCommand{{{"key_a1", now}, {"key_configured_admin", now}}});
  ASSERT_OK(first);
  EXPECT_EQ(std::get<KeyUseOutcome>(first.value()).recorded, 1);
  // Another instance's older use arrives later: the newer one stays.
  auto older = ledger_->run(RecordKeyUseCommand{{{"key_a1", now - 5000}}});
  ASSERT_OK(older);
  EXPECT_EQ(std::get<KeyUseOutcome>(older.value()).recorded, 0);
  EXPECT_EQ(last_used(*ledger_, "key_a1"), now);
  EXPECT_CODE(ledger_->run(RecordKeyUseCommand{}), Code::invalid_request);
  EXPECT_CODE(ledger_->run(RecordKeyUseCommand{{{"key_a1", -1}}}), Code::invalid_request);
}

TEST_P(Lists, StoppingTheLedgerWritesTheUsesNotYetFlushed) {
  make_account("alice");
  make_key("key_a1", "alice");
  ledger_->key_uses().record("key_a1");
  const std::int64_t at = clock_.now_ms();
  ledger_->stop();
  LedgerOptions options;
  options.reaper_interval_ms = 0;
  ledger_ = std::make_unique<Ledger>(*store_, clock_, options);
  EXPECT_EQ(last_used(*ledger_, "key_a1"), at);
}

// --- paging while writes continue (the test) ---------------------------------------------

// Submits `commands` at once (the group committer batches them) and waits for every answer.
void run_all(Ledger& ledger, std::vector<Command> commands) {
  std::latch done(static_cast<std::ptrdiff_t>(commands.size()));
  std::atomic<int> failed{0};
  for (Command& c : commands) {
    ledger.submit(std::move(c), [&](CommandResult r) {
      if (!r.ok()) failed.fetch_add(1);
      done.count_down();
    });
  }
  done.wait();
  ASSERT_EQ(failed.load(), 0);
}

std::string numbered(const char* prefix, int i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%s%05d", prefix, i);
  return buf;
}

// Pages through a list with `limit` until has_more is false; counts how often each id was seen.
template <typename T>
std::map<std::string, int> page_through(const std::function<Result<Page<T>>(const PageRequest&)>& list,
                                        std::string (*id)(const T&), std::int64_t limit, int& pages) {
  std::map<std::string, int> seen;
  PageRequest request{limit};
  for (pages = 0;; ++pages) {
    auto page = list(request);
    EXPECT_TRUE(page.ok()) << page.error().detail;
    if (!page.ok() || page->items.empty()) break;
    for (const T& item : page->items) ++seen[id(item)];
    if (!page->has_more) break;
    request.starting_after = id(page->items.back());
  }
  return seen;
}

TEST_P(Lists, PagingThrough10000AccountsAnd10000HoldsSeesEachExactlyOnceWhileWritesContinue) {
  constexpr int kItems = 10'000;
  constexpr int kHoldAccounts = 100;
  std::vector<Command> accounts, credits, holds;
  for (int i = 0; i < kItems; ++i) accounts.push_back(CreateAccountCommand{numbered("m-", i), 0, std::nullopt});
  for (int i = 0; i < kHoldAccounts; ++i) credits.push_back(CreditCommand{numbered("m-", i), 1'000'000, numbered("c-", i)});
  for (int i = 0; i < kItems; ++i) {
    holds.push_back(ReserveCommand{numbered("m-", i % kHoldAccounts), 1, numbered("r-", i), kTtl, "", ""});
  }
  ASSERT_NO_FATAL_FAILURE(run_all(*ledger_, std::move(accounts)));
  ASSERT_NO_FATAL_FAILURE(run_all(*ledger_, std::move(credits)));
  ASSERT_NO_FATAL_FAILURE(run_all(*ledger_, std::move(holds)));
  std::set<std::string> holds_before;
  for (std::string after;;) {  // every hold that exists before the paging starts
    auto page = ledger_->list_holds({}, {limits::kListPageMax, after.empty() ? std::nullopt : std::optional(after)});
    ASSERT_OK(page);
    for (const Hold& h : page->items) holds_before.insert(h.hold_id);
    if (!page->has_more) break;
    after = page->items.back().hold_id;
  }
  ASSERT_EQ(holds_before.size(), static_cast<std::size_t>(kItems));

  // Another thread writes all the time: accounts before, among and after the existing ids; new
  // holds (ahead of a newest-first cursor); holds that end (their order must not change).
  std::atomic<bool> stop{false};
  std::atomic<int> written{0};
  std::thread writer([&] {
    for (int i = 0; !stop.load(); ++i) {
      std::vector<Command> batch{
          CreateAccountCommand{numbered("a-", i), 0, std::nullopt},   // sorts before every m-
          CreateAccountCommand{numbered("m-", i) + "x", 0, std::nullopt},  // among them
          CreateAccountCommand{numbered("z-", i), 0, std::nullopt},   // after every m-
          ReserveCommand{numbered("m-", i % kHoldAccounts), 1, numbered("w-", i), kTtl, "", ""},
          ReleaseCommand{*std::next(holds_before.begin(), i % kItems)},
      };
      run_all(*ledger_, std::move(batch));
      written.fetch_add(1);
    }
  });

  const int written_at_start = written.load();
  int account_pages = 0, hold_pages = 0;
  const auto accounts_seen = page_through<Account>(
      [&](const PageRequest& r) { return ledger_->list_accounts(r); }, account_id, 100, account_pages);
  const auto holds_seen = page_through<Hold>(
      [&](const PageRequest& r) { return ledger_->list_holds({}, r); }, hold_id, 100, hold_pages);
  const int written_during = written.load() - written_at_start;
  stop.store(true);
  writer.join();

  EXPECT_GT(written_during, 0) << "the writer must have written while the pages were read";
  for (int i = 0; i < kItems; ++i) {
    auto it = accounts_seen.find(numbered("m-", i));
    ASSERT_NE(it, accounts_seen.end()) << numbered("m-", i) << " was never seen";
    ASSERT_EQ(it->second, 1) << numbered("m-", i) << " was seen " << it->second << " times";
  }
  for (const auto& [id, times] : accounts_seen) ASSERT_EQ(times, 1) << id << " was seen twice";
  for (const std::string& id : holds_before) {
    auto it = holds_seen.find(id);
    ASSERT_NE(it, holds_seen.end()) << id << " was never seen";
    ASSERT_EQ(it->second, 1) << id << " was seen " << it->second << " times";
  }
  for (const auto& [id, times] : holds_seen) ASSERT_EQ(times, 1) << id << " was seen twice";
  EXPECT_GE(account_pages, kItems / 100);
  EXPECT_GE(hold_pages, kItems / 100 - 1);
}

INSTANTIATE_TEST_SUITE_P(Backends, Lists, ::testing::ValuesIn(testing::all_backends()), testing::BackendName{});

}  // namespace
}  // namespace tollgate

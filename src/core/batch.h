// tollgate core: a batch of write commands decided in memory — what it reads, what it decides, what
// it writes — and the seam through which each feature slice takes part in it. Pure: no I/O, no
// clock, no threads.
//
// A store applies a batch (group commit) in three steps, the same for every backend:
//   1. keys_of(commands): every row the batch may read or change — the ledger's accounts, holds by
//      id and by request_id, transfers by reference, API keys, the reaper's overdue holds; and each
//      slice's own rows (a slice's commands name the ledger rows they touch too).
//   2. the backend loads those rows into a Snapshot while it holds every account the batch may
//      change exclusively (SQLite: the one writer inside BEGIN IMMEDIATE; PostgreSQL: the accounts'
//      rows locked FOR UPDATE in id order before any hold is read), and reads `now` once; then
//      each slice's rows, by that slice's loader for the dialect, in registration order.
//   3. decide(commands, snapshot) runs every command in order against that in-memory state with
//      core/rules — each decision sees the effects of the ones before it, whichever slice made
//      them — and answers each command and the Effects: every touched account's final row once,
//      the new and changed holds, the events in order, transfers and keys, and each slice's rows.
//      The backend writes the Effects set-based (each slice's by its writer) and commits.
// Deciding under the batch's exclusive lock on the account row is exactly as safe as one
// conditional UPDATE per command: nobody else can change the row between the read and the write.
//
// A refused command changes nothing (its result is the error); the one write a refused command may
// cause is the expiry of the account's overdue holds it found (the reaper's work done early, so
// that no caller waits on a zombie).
//
// The seam. The ledger's part (accounts, credits and debits, holds, keys: LedgerKeys,
// LedgerSnapshot, LedgerEffects, LedgerBatch) is the base every feature builds on. A feature slice
// S (each a folder of its own; assembled in src/slices.h) is a type with:
//   using Commands = std::tuple<C...>;   its command kinds (each kind in exactly one slice)
//   using Keys, Snapshot, Effects, State;  its rows: named, loaded, written, and in memory
//   static void finish(Keys&);          sorts and removes duplicates once every command added its keys
//   static void add_keys(const C&, Keys&, LedgerKeys&);       per kind: its rows, and the ledger's
//   static Result<O> decide(const C&, State&, LedgerBatch&);  per kind, pure: O is C's outcome
//   static Status validate(const C&, const ValidationLimits&);  per kind (core/validate.h)
//   using Outcomes = std::tuple<O...>;  the outcome types its decisions answer
// and, optionally:
//   static void complete(C&, const Completion&);  per kind: what the ledger fills in before the
//                                                 command is queued (defaults, random parts)
//   static constexpr HoldOwner kHoldOwner;        the prefix of the holds it owns (core/hold_id.h)
//   static const Hold* ended_hold(const O&);      per outcome: the hold it ended, or nullptr (the
//                                                 ledger counts ended holds whoever ended them)
// with State(Snapshot, std::int64_t now_ms), State::effects() && → Effects and Effects::empty().
// A slice changes ledger rows only through LedgerBatch (so the money rules run once, and every
// hold it touches has its account locked); its own rows are written guarded by their `before`
// values, like the ledger's. Each dialect has a loader and a writer per slice (store/sqlite,
// store/postgres: found by overload; a slice without one does not compile). No virtual call and no
// allocation per command: the dispatch is resolved at compile time (std::visit over the variant).
//
// Thread safety: pure functions over values.
#pragma once

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "core/commands.h"
#include "core/hold_id.h"
#include "core/model.h"
#include "core/validate.h"

namespace tollgate::batch {

// The ledger's own command kinds (core/commands.h), decided by LedgerBatch.
using LedgerCommands = std::tuple<CreateAccountCommand, CreditCommand, DebitCommand, ReserveCommand, CommitCommand,
                                  ReleaseCommand, ExtendCommand, ExpireOverdueCommand, CreateKeyCommand,
                                  RevokeKeyCommand, RecordKeyUseCommand, UpdateAccountCommand>;

// And what they answer, one outcome type per kind.
using LedgerOutcomes =
    std::tuple<AccountOutcome, TransferOutcome, HoldOutcome, ExpireOutcome, KeyOutcome, KeyUseOutcome>;

// What the ledger fills into a slice's command before it is queued — a batch is pure, so the
// configured defaults and the random parts of new ids come with the commands (Registry::complete).
struct Completion {
  std::int64_t hold_ttl_ms_default = 0;  // a new hold's TTL when the command names none
  LateCommitPolicy late_commit = LateCommitPolicy::charge;
  std::function<std::string()> hold_id_random;  // the random part of a new hold's id, fresh per call
  // n bytes from the operating system's CSPRNG, fresh per call: the random parts that must not be
  // guessed (a webhook endpoint's id and signing secret).
  std::function<std::string(std::size_t)> random_bytes;
};

// Every ledger key a batch reads (slices add theirs here too: the holds and accounts they change).
// Lists are sorted and free of duplicates once finish()ed.
struct LedgerKeys {
  // Accounts named by the commands. Together with the accounts of `hold_seqs`' holds, these are the
  // accounts the batch may change: a backend locks them (in id order) before it reads any hold.
  std::vector<std::string> accounts;
  std::vector<std::string> hold_ids;       // holds named by id (commit, release, extend)
  std::vector<std::int64_t> hold_seqs;     // their sequence numbers (well-formed ids only)
  std::vector<std::string> request_ids;    // holds looked up by request_id (reserve)
  std::vector<std::string> references;     // transfers looked up by reference (credit, debit)
  std::vector<std::string> key_ids;        // API keys (create, revoke)
  // Accounts whose effective view an outcome reports (create_account, credit, debit): their
  // overdue totals and oldest live holds are loaded (AccountView).
  std::vector<std::string> view_accounts;
  std::int64_t new_holds_max = 0;     // reserve commands: the most hold sequence numbers needed
  std::int64_t new_lots_max = 0;      // credits: the most lot sequence numbers needed
  std::int64_t overdue_max = 0;       // the reaper's passes: overdue holds of any account, at most
  // and as many overdue credit lots (available credits past expires_at) of any account
  std::int64_t live_holds_ending_max = 0;  // commits and releases: live holds that may end
  // Reserves, debits and commits: each may expire its account's overdue holds (at most
  // limits::kReaperBatchMaxDefault at a time) when the stored row refuses it.
  std::int64_t zombie_expiring_commands = 0;

  // The oldest live holds an AccountView must list: one more than the batch can end.
  std::int64_t oldest_live_needed() const { return live_holds_ending_max + 1; }
  // The overdue holds to load per locked account: as many as the batch's commands may expire.
  std::int64_t overdue_per_account_max() const;
  // The oldest overdue holds (of any account) the reaper's passes must see: their own maximum plus
  // every overdue hold the commands before them may expire first — those named by id, and the
  // `overdue_loaded` loaded for the locked accounts. 0 without a reaper pass.
  std::int64_t reaper_load_max(std::int64_t overdue_loaded) const;
  // An upper bound of reaper_load_max() known before anything is loaded (for locking the accounts
  // of those holds in the same round trip as the loads).
  std::int64_t reaper_load_bound() const;
};

// The keys of each ledger command kind (an overload per kind), and the sort once all are in.
void add_keys(const CreateAccountCommand& c, LedgerKeys& k);
void add_keys(const CreditCommand& c, LedgerKeys& k);
void add_keys(const DebitCommand& c, LedgerKeys& k);
void add_keys(const ReserveCommand& c, LedgerKeys& k);
void add_keys(const CommitCommand& c, LedgerKeys& k);
void add_keys(const ReleaseCommand& c, LedgerKeys& k);
void add_keys(const ExtendCommand& c, LedgerKeys& k);
void add_keys(const ExpireOverdueCommand& c, LedgerKeys& k);
void add_keys(const CreateKeyCommand& c, LedgerKeys& k);
void add_keys(const RevokeKeyCommand& c, LedgerKeys& k);
void add_keys(const RecordKeyUseCommand& c, LedgerKeys& k);
void add_keys(const UpdateAccountCommand& c, LedgerKeys& k);
// A hold named by id (commit, release, extend, a slice's change of a hold it owns): its account is
// locked too.
void add_hold_key(std::string_view hold_id, LedgerKeys& k);
void finish(LedgerKeys& k);

// What an account's effective view needs beyond its row: readers see overdue holds as expired
// (their amounts as available) and report the age of the oldest live hold.
struct AccountView {
  std::string account_id;
  std::int64_t overdue_count = 0;  // active holds past their deadline at now (all of them)
  std::int64_t overdue_sum = 0;
  // The oldest live (active, not overdue) holds as (created_at_ms, seq), ascending, at most
  // Keys::oldest_live_needed() of them — enough that the oldest survivor is known after the batch
  // ended as many live holds as it can.
  std::vector<std::pair<std::int64_t, std::int64_t>> oldest_live;
};

// The ledger rows a batch decides on, as the backend read them under the batch's locks.
struct LedgerSnapshot {
  std::int64_t now_ms = 0;
  // Account rows as stored (no overdue adjustment). Every account here is locked for the batch:
  // the named ones, those of the holds named, and those whose overdue holds the reaper may expire.
  std::vector<Account> accounts;
  // Holds: named by id or request_id; each locked account's overdue holds (oldest deadline first,
  // then creation order; at most Keys::overdue_per_account_max() per account); the oldest overdue
  // holds for the reaper (at most Keys::reaper_load_max(), of locked accounts). Duplicates are
  // allowed (the same row twice).
  std::vector<Hold> holds;
  std::vector<std::pair<Transfer, Event>> transfers;  // by reference, with the event each wrote
  std::vector<ApiKey> keys;
  std::vector<AccountView> views;  // of Keys::view_accounts that exist
  // Credit lots (core/lots.h): every lot of each locked account with credits available or reserved
  // (all an account can spend or give back to, and the base's available is the account's minus
  // theirs), and the lots the loaded holds drew from (a refund gives back to spent lots too). For a
  // reaper pass, also the oldest lots of any account with available credits past expires_at (at
  // most Keys::overdue_max), their accounts locked and their live lots loaded. Duplicates allowed.
  std::vector<Lot> lots;
  std::vector<std::int64_t> new_lot_seqs;  // as new_hold_seqs, at least Keys::new_lots_max
  // Sequence numbers for new holds, ascending, at least Keys::new_holds_max of them (SQLite: the
  // next ones after the largest; PostgreSQL: taken from its sequence — unused ones leave gaps).
  std::vector<std::int64_t> new_hold_seqs;
};

// A row before and after the batch.
template <typename Row>
struct Change {
  Row before;
  Row after;
};

// What the batch writes of the ledger's rows. Every list is in a deterministic order.
struct LedgerEffects {
  std::vector<Account> new_accounts;                 // final rows, by account_id
  std::vector<Change<Account>> changed_accounts;     // by account_id; each account once
  std::vector<Hold> new_holds;                       // final rows, by request_id
  std::vector<Change<Hold>> changed_holds;           // by hold_id
  // In the order they happened; event_id 0: the backend assigns ids that increase in this order.
  std::vector<Event> events;
  // New transfers, by reference; event_id 0, `event_index` names their event in `events`.
  struct NewTransfer {
    Transfer transfer;
    std::size_t event_index = 0;
  };
  std::vector<NewTransfer> transfers;
  std::vector<ApiKey> new_keys;
  std::vector<Change<ApiKey>> changed_keys;
  std::vector<Lot> new_lots;             // by seq
  std::vector<Change<Lot>> changed_lots;  // by seq

  bool empty() const {
    return new_accounts.empty() && changed_accounts.empty() && new_holds.empty() && changed_holds.empty() &&
           events.empty() && transfers.empty() && new_keys.empty() && changed_keys.empty() && new_lots.empty() &&
           changed_lots.empty();
  }
};

// The ledger's rows in memory while a batch is decided: its decisions, and the operations a slice
// may use on them. One per batch, used by one thread; the rows it hands out live as long as it.
class LedgerBatch {
 public:
  // `owners`: the registered slices' owned-hold prefixes (static data: seam::hold_owners()).
  LedgerBatch(LedgerSnapshot snapshot, std::span<const HoldOwner> owners);
  ~LedgerBatch();
  LedgerBatch(LedgerBatch&&) noexcept;
  LedgerBatch& operator=(LedgerBatch&&) noexcept;

  std::int64_t now_ms() const;

  // The ledger's command kinds; `index` is the command's place in the batch.
  Result<AccountOutcome> decide(const CreateAccountCommand& c, std::size_t index);
  Result<TransferOutcome> decide(const CreditCommand& c, std::size_t index);
  Result<TransferOutcome> decide(const DebitCommand& c, std::size_t index);
  Result<HoldOutcome> decide(const ReserveCommand& c, std::size_t index);
  Result<HoldOutcome> decide(const CommitCommand& c, std::size_t index);
  Result<HoldOutcome> decide(const ReleaseCommand& c, std::size_t index);
  Result<HoldOutcome> decide(const ExtendCommand& c, std::size_t index);
  Result<ExpireOutcome> decide(const ExpireOverdueCommand& c, std::size_t index);
  Result<KeyOutcome> decide(const CreateKeyCommand& c, std::size_t index);
  Result<KeyOutcome> decide(const RevokeKeyCommand& c, std::size_t index);
  Result<KeyUseOutcome> decide(const RecordKeyUseCommand& c, std::size_t index);
  Result<AccountOutcome> decide(const UpdateAccountCommand& c, std::size_t index);

  // --- for slices: holds they own (core/hold_id.h), changed with the same rules as the holds API's ---
  // The hold as the batch left it (nullptr: none loaded by that request_id).
  const Hold* hold_by_request(std::string_view request_id);
  // Whether the account exists as the batch left it (one made earlier in the batch too). The slice
  // names it in LedgerKeys::accounts (so it is loaded, and locked).
  bool account_exists(std::string_view account_id);
  // A hold about to change (named in LedgerKeys by add_hold_key): expired first when overdue, so
  // that the rules see stored states. nullptr: no such hold.
  const Hold* hold_for_change(std::string_view hold_id);
  // Reserve, commit and release as their commands do — without the holds API's refusal of a hold
  // a slice owns (core/hold_id.h), which is the slice's own to end.
  Result<HoldOutcome> reserve(const ReserveCommand& c);
  Result<HoldOutcome> commit_hold(const CommitCommand& c);
  Result<HoldOutcome> release_hold(const ReleaseCommand& c);

  // --- for slices: money given back --------------------------------------------------------------
  // Refunds a charged hold (named in LedgerKeys by add_hold_key) by rules::plan_refund: `amount`
  // (unset: all it charged and has not given back) moves from used to available, the hold's
  // refunded_amount grows, and a `refunded` event carries `reason` and, as its reference, the
  // refund's own id. `owner_request_id` set: the hold must be the one with that request_id (a slice
  // refunding a hold its row owns: not_found otherwise); unset: an owned hold (core/hold_id.h) is
  // refused (conflict: its owner's refund gives it back, with the owning row).
  struct Refund {
    std::string hold_id;
    std::optional<std::string> owner_request_id;
    std::optional<std::int64_t> amount;
    std::string reason;
    std::string reference;
  };
  struct Refunded {
    Hold hold;                // as it is now
    std::int64_t amount = 0;  // what this refund gave back
  };
  Result<Refunded> refund_hold(const Refund& r);

  // --- for slices: money in and out (payments/) ----------------------------------------------------
  // A credit as CreditCommand makes it (the same reference again: a replay, created=false); a
  // credit that brings an account frozen for a refund shortfall back to 0 or above unfreezes it.
  // The outcome's event has no id yet (a slice's outcome is not told it).
  Result<TransferOutcome> credit(const CreditCommand& c);
  // Takes back `amount` purchased credits under `reference` (a `debited` transfer with `reason`) by
  // rules::take_back: `into_debt` takes all of it and, when that is more than was available, the
  // account goes into debt and is frozen (kFrozenForRefundShortfall, an account_updated event with
  // that reason; an account already frozen keeps its reason); otherwise only what is available.
  // A frozen account is taken from too. Nothing taken: no event, no transfer. The same reference
  // again answers what it took (nothing moves). Refusals: not_found, idempotency_mismatch (the
  // reference names another transfer), overflow.
  struct TakeBack {
    std::string account_id;
    std::int64_t amount = 0;
    std::string reference;
    std::string reason;
    bool into_debt = true;
    // The lot made by the credit under this reference is taken from first (then the account's
    // lots in spending order, then its base).
    std::optional<std::string> first_from_credit;
  };
  struct TakenBack {
    Account account;          // as readers see it now
    std::int64_t taken = 0;   // what this took (a replay: what the reference took)
    bool froze = false;       // this put the account into debt and froze it
  };
  Result<TakenBack> take_back(const TakeBack& t);
  // Freezes the account for `reason` (an account_updated event carrying it); already frozen for
  // that reason: nothing (created=false). Refusal: not_found.
  Result<AccountOutcome> freeze(std::string_view account_id, std::string_view reason);
  // The account as readers see it now (named in LedgerKeys::view_accounts); nullopt: none.
  std::optional<Account> account_view(std::string_view account_id);

  // The ledger's effects, and the results that carry a new event: (result index, event index).
  LedgerEffects effects(std::vector<std::pair<std::size_t, std::size_t>>& result_events) &&;

  class State;  // core/batch.cc

 private:
  std::unique_ptr<State> state_;  // one allocation per batch
};

// --- the composition of the ledger and the slices S... (src/slices.h names them) ---------------

// The keys, snapshot and effects of the whole batch: the ledger's, and each slice's in `features`.
template <typename... S>
struct BatchKeys : LedgerKeys {
  std::tuple<typename S::Keys...> features;
  template <typename Slice>
  const typename Slice::Keys& of() const { return std::get<typename Slice::Keys>(features); }
};

template <typename... S>
struct BatchSnapshot : LedgerSnapshot {
  std::tuple<typename S::Snapshot...> features;
  template <typename Slice>
  typename Slice::Snapshot& of() { return std::get<typename Slice::Snapshot>(features); }
};

template <typename... S>
struct BatchEffects : LedgerEffects {
  std::tuple<typename S::Effects...> features;
  template <typename Slice>
  const typename Slice::Effects& of() const { return std::get<typename Slice::Effects>(features); }
  bool empty() const {
    return LedgerEffects::empty() && (std::get<typename S::Effects>(features).empty() && ...);
  }
};

template <typename Outcome, typename... S>
struct BatchDecision {
  std::vector<Result<Outcome>> results;  // one per command
  BatchEffects<S...> effects;
  // Results that carry a new event (a transfer's TransferOutcome): (result index, event index).
  // Once the backend assigned event ids, assign_event_ids() copies them in.
  std::vector<std::pair<std::size_t, std::size_t>> result_events;
};

// A backend's loaders: f(keys, snapshot) with each slice's parts, in registration order.
template <typename... S, typename F>
void for_each_slice(const BatchKeys<S...>& k, BatchSnapshot<S...>& s, F&& f) {
  (f(std::get<typename S::Keys>(k.features), std::get<typename S::Snapshot>(s.features)), ...);
}

// A backend's writers: f(effects) with each slice's effects, in registration order.
template <typename... S, typename F>
void for_each_slice(const BatchEffects<S...>& e, F&& f) {
  (f(std::get<typename S::Effects>(e.features)), ...);
}

namespace seam {  // the compile-time dispatch; callers use src/slices.h's keys_of() and decide()

template <typename C, typename Tuple>
struct contains;
template <typename C, typename... T>
struct contains<C, std::tuple<T...>> : std::bool_constant<(std::is_same_v<C, T> || ...)> {};

template <typename C, typename... S>
inline constexpr int owners = int{contains<C, LedgerCommands>::value} + (int{contains<C, typename S::Commands>::value} + ... + 0);

template <typename Outcome, typename T>
Result<Outcome> widen(Result<T>&& r) {
  if (!r.ok()) return std::move(r).error();
  return Outcome(std::move(r).value());
}

template <typename C, typename... S>
void add_keys(const C& c, BatchKeys<S...>& k) {
  static_assert(owners<C, S...> == 1, "a command kind belongs to exactly one slice");
  if constexpr (contains<C, LedgerCommands>::value) {
    batch::add_keys(c, static_cast<LedgerKeys&>(k));
  } else {
    ([&] {
      if constexpr (contains<C, typename S::Commands>::value) {
        S::add_keys(c, std::get<typename S::Keys>(k.features), static_cast<LedgerKeys&>(k));
      }
    }(), ...);
  }
}

// The slice among S... whose Commands hold C (void: none).
template <typename C, typename... S>
struct owner {
  using type = void;
};
template <typename C, typename S0, typename... Rest>
struct owner<C, S0, Rest...> {
  using type = std::conditional_t<contains<C, typename S0::Commands>::value, S0, typename owner<C, Rest...>::type>;
};

// The slices' owned-hold prefixes (core/hold_id.h), in registration order: static data.
template <typename S>
concept OwnsHolds = requires {
  { S::kHoldOwner } -> std::convertible_to<HoldOwner>;
};
template <typename... S>
constexpr auto make_hold_owners() {
  std::array<HoldOwner, (std::size_t{0} + ... + std::size_t{OwnsHolds<S> ? 1u : 0u})> a{};
  std::size_t i = 0;
  ([&] {
    if constexpr (OwnsHolds<S>) a[i++] = S::kHoldOwner;
  }(), ...);
  return a;
}
template <typename... S>
inline constexpr auto kHoldOwners = make_hold_owners<S...>();
template <typename... S>
std::span<const HoldOwner> hold_owners() {
  return kHoldOwners<S...>;
}

template <typename Outcome, typename C, typename... S>
Result<Outcome> decide_one(const C& c, std::size_t index, LedgerBatch& ledger, std::tuple<typename S::State...>& states) {
  static_assert(owners<C, S...> == 1, "a command kind belongs to exactly one slice");
  if constexpr (contains<C, LedgerCommands>::value) {
    return widen<Outcome>(ledger.decide(c, index));
  } else {
    using Slice = typename owner<C, S...>::type;
    return widen<Outcome>(Slice::decide(c, std::get<typename Slice::State>(states), ledger));
  }
}

}  // namespace seam

// The keys of `commands`, a span of a variant of every kind (exhaustive: a kind that no slice
// registers, or two do, does not compile).
template <typename Command, typename... S>
void collect_keys(std::span<const Command> commands, BatchKeys<S...>& k) {
  for (const Command& command : commands) std::visit([&](const auto& c) { seam::add_keys(c, k); }, command);
  finish(static_cast<LedgerKeys&>(k));
  (S::finish(std::get<typename S::Keys>(k.features)), ...);
}

// Decides `commands` in order against `snapshot` (which must hold the rows their keys name).
// Refusals are results; a bug is an assertion.
template <typename Command, typename Outcome, typename... S>
void decide_batch(std::span<const Command> commands, BatchSnapshot<S...> snapshot, BatchDecision<Outcome, S...>& d) {
  d.results.reserve(commands.size());
  const std::int64_t now_ms = snapshot.now_ms;
  std::tuple<typename S::State...> states(
      typename S::State(std::move(std::get<typename S::Snapshot>(snapshot.features)), now_ms)...);
  LedgerBatch ledger(std::move(static_cast<LedgerSnapshot&>(snapshot)), seam::hold_owners<S...>());
  for (std::size_t i = 0; i < commands.size(); ++i) {
    d.results.push_back(std::visit(
        [&](const auto& c) { return seam::decide_one<Outcome, std::decay_t<decltype(c)>, S...>(c, i, ledger, states); },
        commands[i]));
  }
  static_cast<LedgerEffects&>(d.effects) = std::move(ledger).effects(d.result_events);
  d.effects.features =
      std::tuple<typename S::Effects...>(std::move(std::get<typename S::State>(states)).effects()...);
}

// Copies the event ids the backend assigned (one per effects.events, increasing) into the results
// that report their event.
template <typename Outcome, typename... S>
void assign_event_ids(BatchDecision<Outcome, S...>& d, std::span<const std::int64_t> event_ids) {
  TG_ASSERT(event_ids.size() == d.effects.events.size());
  for (std::size_t i = 1; i < event_ids.size(); ++i) TG_ASSERT(event_ids[i - 1] < event_ids[i]);
  for (std::size_t i = 0; i < event_ids.size(); ++i) d.effects.events[i].event_id = event_ids[i];
  for (auto& t : d.effects.transfers) t.transfer.event_id = event_ids[t.event_index];
  for (const auto& [result, event] : d.result_events) {
    auto* outcome = std::get_if<TransferOutcome>(&d.results.at(result).value());
    TG_ASSERT(outcome != nullptr);
    outcome->event.event_id = event_ids[event];
  }
}

namespace seam {
template <typename... Tuples>
struct variant_of {
  template <typename... T>
  static std::variant<T...> from(std::tuple<T...>*);
  using type = decltype(from(static_cast<decltype(std::tuple_cat(std::declval<Tuples>()...))*>(nullptr)));
};

// What the ledger fills in before `c` is queued, when C's slice declares it (the ledger's own
// kinds are the ledger's to complete).
template <typename C, typename... S>
void complete_one(C& c, const Completion& completion) {
  if constexpr (!contains<C, LedgerCommands>::value) {
    using Slice = typename owner<C, S...>::type;
    if constexpr (requires { Slice::complete(c, completion); }) Slice::complete(c, completion);
  }
}

// The hold a slice's outcome ended, when its slice declares ended_hold for it; else nullptr.
template <typename O, typename... S>
const Hold* ended_hold_one(const O& o) {
  const Hold* hold = nullptr;
  ([&] {
    if constexpr (contains<O, typename S::Outcomes>::value && requires { S::ended_hold(std::declval<const O&>()); }) {
      if (hold == nullptr) hold = S::ended_hold(o);
    }
  }(), ...);
  return hold;
}

template <typename C, typename... S>
Status validate_one(const C& c, const ValidationLimits& limits) {
  static_assert(owners<C, S...> == 1, "a command kind belongs to exactly one slice");
  if constexpr (contains<C, LedgerCommands>::value) {
    return validate_command(c, limits);
  } else {
    return owner<C, S...>::type::validate(c, limits);
  }
}
}  // namespace seam

// The whole batch: the ledger's part and the feature slices S..., in the order their rows are loaded
// and written. src/slices.h names the one registry the program uses.
template <typename... S>
struct Registry {
  using Command = typename seam::variant_of<LedgerCommands, typename S::Commands...>::type;
  using Outcome = typename seam::variant_of<LedgerOutcomes, typename S::Outcomes...>::type;
  using Keys = BatchKeys<S...>;
  using Snapshot = BatchSnapshot<S...>;
  using Effects = BatchEffects<S...>;
  using Decision = BatchDecision<Outcome, S...>;

  static Keys keys_of(std::span<const Command> commands) {
    Keys k;
    collect_keys(commands, k);
    return k;
  }
  static Decision decide(std::span<const Command> commands, Snapshot snapshot) {
    Decision d;
    decide_batch(commands, std::move(snapshot), d);
    return d;
  }
  static Status validate(const Command& command, const ValidationLimits& limits) {
    ValidationLimits with_owners = limits;
    with_owners.hold_owners = seam::hold_owners<S...>();
    return std::visit(
        [&](const auto& c) { return seam::validate_one<std::decay_t<decltype(c)>, S...>(c, with_owners); }, command);
  }
  // The hold a slice's outcome ended (slices that declare ended_hold); nullptr for the ledger's own
  // outcomes and any other.
  static const Hold* ended_hold(const Outcome& outcome) {
    return std::visit([](const auto& o) { return seam::ended_hold_one<std::decay_t<decltype(o)>, S...>(o); }, outcome);
  }
  // Fills in what a slice's kind needs from the server (Completion) before it is queued.
  static void complete(Command& command, const Completion& completion) {
    std::visit([&](auto& c) { seam::complete_one<std::decay_t<decltype(c)>, S...>(c, completion); }, command);
  }
};

}  // namespace tollgate::batch

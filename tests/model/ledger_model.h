// Test model: the rules of every write command (the ledger's, the jobs', the coordination's) stated
// a second time, plainly, over ordinary maps — as LevelDB checks its skiplist against std::set. The
// differential test (tests/store/differential_test.cc) runs the same commands through the real
// batch path of a real store and through this model and compares every answer and the final state.
//
// It is written from the documented rules (core/commands.h, core/rules.h, jobs/job_batch.h,
// coord/coord.h), not from core/batch.cc: it calls none of the production decide functions (nor
// core/rules.h), so a rule broken in one place and not the other shows up as a difference. One
// command is applied at a time, on the state the commands before it left, which is what a batch
// promises ("decided in order, each seeing the effects of the ones before it").
//
// What it does not model: error detail texts (the test compares codes and the values an error
// carries), event ids (it numbers its own events), the hold sequence numbers of PostgreSQL (it
// makes "hold_<n>_<random>" with n counting from 1: SQLite's ids; the test compares hold ids through
// the request id that made them), and the job history's detail texts (kinds and attempts only).
//
// Thread safety: none; one thread uses a model.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "slices.h"

namespace tollgate::testing {

class LedgerModel {
 public:
  // Applies one valid command (validated at the service boundary) at time `now_ms`.
  CommandResult apply(const Command& command, std::int64_t now_ms);

  // --- the state, as a reader sees it at `now_ms` ---
  std::optional<Account> account(const std::string& account_id, std::int64_t now_ms) const;
  std::vector<std::string> account_ids() const;
  // Every hold, as a reader sees it (an overdue active hold is expired), in creation order.
  std::vector<Hold> holds(std::int64_t now_ms) const;
  std::vector<Event> events_of(const std::string& account_id) const;  // oldest first
  std::optional<jobs::Job> job(const std::string& id) const;
  std::vector<jobs::JobEntry> history(const std::string& id) const;  // details left empty
  std::vector<std::string> job_ids() const;
  std::optional<coord::Lock> lock(const std::string& key) const;
  std::optional<coord::IdempotencyKey> idempotency_key(const std::string& key) const;
  std::optional<ApiKey> key(const std::string& key_id) const;
  std::size_t rate_rows() const { return rates_.size(); }
  std::optional<webhooks::Endpoint> endpoint(const std::string& endpoint_id) const;
  std::optional<webhooks::Delivery> delivery(const std::string& endpoint_id, std::int64_t event_id) const;
  std::optional<payments::Payment> payment(const std::string& payment_id) const;
  std::optional<prices::Price> price(const std::string& feature) const;
  std::vector<prices::Price> price_versions() const { return price_versions_; }  // in the order made
  std::optional<prices::PricedHold> priced_hold(const std::string& request_id) const;
  // Marks the start of a batch: a new endpoint's cursor is the feed's head before the batch (the
  // store reads it when it loads the batch's rows).
  void begin_batch() { feed_head_at_batch_ = next_event_id_ - 1; }

 private:
  struct StoredHold {
    Hold hold;
    std::int64_t seq = 0;  // creation order: ties of the expiry order
  };

  // ledger
  CommandResult create_account(const CreateAccountCommand& c);
  CommandResult transfer(const std::string& account_id, std::int64_t amount, const std::string& reference,
                         const std::string& reason, EventType kind);
  Result<HoldOutcome> reserve(const ReserveCommand& c);
  Result<HoldOutcome> commit(const std::string& hold_id, std::optional<std::int64_t> amount, LateCommitPolicy policy);
  Result<HoldOutcome> release(const std::string& hold_id, const std::optional<std::string>& reason);
  CommandResult extend(const ExtendCommand& c);
  CommandResult update(const UpdateAccountCommand& c);
  CommandResult expire_overdue(const ExpireOverdueCommand& c);
  CommandResult create_key(const CreateKeyCommand& c);
  CommandResult revoke_key(const RevokeKeyCommand& c);
  CommandResult record_key_use(const RecordKeyUseCommand& c);
  // jobs
  CommandResult submit(const jobs::SubmitJobCommand& c);
  CommandResult claim(const jobs::ClaimJobCommand& c);
  CommandResult end(const jobs::EndJobCommand& c);
  // coordination
  CommandResult lock_op(const coord::LockCommand& c);
  CommandResult idempotency(const coord::IdempotencyCommand& c);
  CommandResult rate(const coord::RateLimitCommand& c);
  CommandResult prune(const coord::PruneCoordCommand& c);
  // webhook endpoints
  CommandResult create_endpoint(const webhooks::CreateEndpointCommand& c);
  CommandResult update_endpoint(const webhooks::UpdateEndpointCommand& c);
  CommandResult delete_endpoint(const webhooks::DeleteEndpointCommand& c);
  CommandResult rotate_endpoint(const webhooks::RotateEndpointSecretCommand& c);
  CommandResult replay_endpoint(const webhooks::ReplayEndpointCommand& c);
  CommandResult record_deliveries(const webhooks::RecordDeliveriesCommand& c);
  // refunds
  CommandResult refund(const refunds::RefundCommand& c);
  // payments
  CommandResult credit_payment(const payments::CreditPaymentCommand& c);
  CommandResult take_back_payment(const payments::TakeBackPaymentCommand& c);
  CommandResult dispute_payment(const payments::DisputePaymentCommand& c);
  // prices
  CommandResult set_price(const prices::SetPriceCommand& c);
  CommandResult reserve_by_feature(const prices::ReserveByFeatureCommand& c);

  // helpers
  bool overdue(const Hold& h) const { return h.status == HoldStatus::active && now_ >= h.expires_at_ms; }
  Account view(const std::string& account_id) const { return *account(account_id, now_); }
  void expire(StoredHold& h);
  bool expire_overdue_of(const std::string& account_id);  // true if any expired
  StoredHold* hold_for_change(const std::string& hold_id);  // expired first when overdue
  void end_active(Hold& h, HoldStatus status, std::int64_t committed);
  std::size_t add_event(Event e);  // and the balance notices it writes: its index in events_
  Event hold_event(const Hold& h, EventType type, std::int64_t amount) const;
  void note(const jobs::Job& j, const std::string& kind, std::optional<int> attempt);
  void settings_event(const Account& a, std::optional<std::string> reason);  // an account_updated event

  std::int64_t now_ = 0;
  std::int64_t next_seq_ = 1;
  std::int64_t next_event_id_ = 1;
  std::map<std::string, Account> accounts_;  // the stored rows (no overdue adjustment)
  std::map<std::string, StoredHold> holds_;
  std::map<std::string, std::string> hold_by_request_;
  std::map<std::string, std::pair<Transfer, Event>> transfers_;
  std::vector<Event> events_;
  std::map<std::string, ApiKey> keys_;
  std::map<std::string, jobs::Job> jobs_;
  std::vector<jobs::JobEntry> history_;
  std::map<std::string, coord::Lock> locks_;
  std::map<std::string, coord::IdempotencyKey> idem_;
  std::map<std::pair<std::string, std::string>, std::int64_t> rates_;  // (policy, key) → tat_ns
  std::map<std::string, webhooks::Endpoint> endpoints_;
  std::map<std::pair<std::string, std::int64_t>, webhooks::Delivery> deliveries_;
  std::int64_t feed_head_at_batch_ = 0;
  std::map<std::string, refunds::Refund> refunds_;  // by request_id
  std::map<std::string, payments::Payment> payments_;             // by payment_id
  std::map<std::string, payments::PaymentEvent> payment_events_;  // by reference
  std::map<std::string, prices::Price> prices_;                   // by feature: the current one
  std::vector<prices::Price> price_versions_;
  std::map<std::string, prices::PricedHold> priced_holds_;        // by request_id
};

}  // namespace tollgate::testing

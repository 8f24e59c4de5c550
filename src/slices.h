// tollgate: the one place the feature slices are registered. A write batch (core/batch.h) is the
// ledger's part — accounts, credits and debits, holds, API keys — and these slices, each a folder of
// its own: its commands, the rows they name, a pure decide, and a loader and writer per dialect
// (docs/adding-a-feature.md). The order is the order their rows are loaded and written in.
//
// Everything that carries commands (the ledger, the group commit, the stores, the tests) names them
// through this header: `Command`, `Outcome`, `CommandResult`, `batch::Keys` … are assembled here from
// the ledger's kinds and each slice's, and nowhere else.
//
// Thread safety: types, and pure functions over values.
#pragma once

#include <cstdint>
#include <span>
#include <utility>

#include "coord/coord_batch.h"
#include "core/batch.h"
#include "core/commands.h"
#include "core/validate.h"
#include "jobs/job_batch.h"
#include "payments/payment_batch.h"
#include "prices/price_batch.h"
#include "refunds/refund_batch.h"
#include "webhooks/webhook_batch.h"

namespace tollgate {

// The registration: one line per feature slice.
using Slices = batch::Registry<jobs::JobSlice,           // jobs and their history (jobs/job_batch.h)
                               coord::CoordSlice,        // locks, idempotency keys, rate limits (coord/coord_batch.h)
                               webhooks::WebhookSlice,   // webhook endpoints and deliveries (webhooks/webhook_batch.h)
                               refunds::RefundSlice,     // refunds of charged holds (refunds/refund_batch.h)
                               payments::PaymentSlice,   // credits from payment providers (payments/payment_batch.h)
                               prices::PriceSlice>;      // prices, holds by feature (prices/price_batch.h)

// The command kinds of the slices, by their short names (as the ledger's own).
using jobs::ClaimJobCommand;
using jobs::EndJobCommand;
using jobs::JobOutcome;
using jobs::SubmitJobCommand;
using coord::IdempotencyCommand;
using coord::IdempotencyOutcome;
using coord::LockCommand;
using coord::LockOutcome;
using coord::PruneCoordCommand;
using coord::PruneOutcome;
using coord::RateLimitCommand;
using coord::RateLimitOutcome;
using payments::CreditPaymentCommand;
using payments::DisputePaymentCommand;
using payments::PaymentOutcome;
using payments::TakeBackPaymentCommand;
using prices::PricedHoldOutcome;
using prices::PriceOutcome;
using prices::ReserveByFeatureCommand;
using prices::SetPriceCommand;
using refunds::RefundCommand;
using refunds::RefundOutcome;
using webhooks::CreateEndpointCommand;
using webhooks::DeleteEndpointCommand;
using webhooks::DeliveriesOutcome;
using webhooks::EndpointOutcome;
using webhooks::RecordDeliveriesCommand;
using webhooks::ReplayEndpointCommand;
using webhooks::RotateEndpointSecretCommand;
using webhooks::UpdateEndpointCommand;

// What a caller asks for (validated at the service boundary), and what each one answers.
using Command = Slices::Command;
using Outcome = Slices::Outcome;
using CommandResult = Result<Outcome>;

// Checks a command at the service boundary: the ledger's kinds by core/validate.h, each slice's by
// its own `validate`. Every refusal is invalid_request naming the field.
inline Status validate(const Command& command, const ValidationLimits& limits) {
  return Slices::validate(command, limits);
}

// Fills in what a slice's command needs from the server before it is queued (the ledger's own
// kinds are the ledger's to complete): the configured defaults, the random parts of new ids.
inline void complete(Command& command, const batch::Completion& completion) {
  Slices::complete(command, completion);
}

// The hold a slice's command ended (its outcome says so), for the ledger's counters; nullptr for
// the ledger's own outcomes (the ledger reads those itself) and a slice's that ended none.
inline const Hold* slice_ended_hold(const Outcome& outcome) { return Slices::ended_hold(outcome); }

namespace batch {
using Keys = Slices::Keys;
using Snapshot = Slices::Snapshot;
using Effects = Slices::Effects;
using Decision = Slices::Decision;

// The keys of `commands` (core/batch.h: exhaustive, a kind no slice registers does not compile).
inline Keys keys_of(std::span<const Command> commands) { return Slices::keys_of(commands); }

// Decides `commands` in order against `snapshot` (which must hold the rows keys_of(commands)
// names). Refusals are results; a bug is an assertion.
inline Decision decide(std::span<const Command> commands, Snapshot snapshot) {
  return Slices::decide(commands, std::move(snapshot));
}

// Copies the event ids the backend assigned (one per Effects::events, increasing) into the results
// that report their event.
inline void fill_event_ids(Decision& decision, std::span<const std::int64_t> event_ids) {
  assign_event_ids(decision, event_ids);
}
}  // namespace batch

}  // namespace tollgate

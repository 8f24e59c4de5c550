// tollgate payments: the reads of payments (store/reads.h implements them once for every backend).
// The payment routes read a payment before they queue a refund or dispute of it: its account, which
// the command names so that the batch locks it (a payment's account never changes).
//
// Thread safety: any thread; each call answers from one snapshot.
#pragma once

#include <string_view>

#include "core/result.h"
#include "payments/payment_batch.h"

namespace tollgate::payments {

class PaymentReads {
 public:
  virtual ~PaymentReads() = default;
  // The payment credited under `payment_id`. not_found when there is none.
  virtual Result<Payment> get_payment(std::string_view payment_id) = 0;
  // The payment a provider names by its own id (Stripe: the payment_intent); the oldest when
  // several carry it. not_found when there is none.
  virtual Result<Payment> find_payment(Provider provider, std::string_view provider_payment) = 0;
};

}  // namespace tollgate::payments

// tollgate webhooks: the reads of webhook endpoints, as one narrow interface every store backend
// implements (a role of the store, like jobs/job_store.h). The rows are written through the
// store's batches (webhooks/webhook_batch.h); this interface only reads. The rows read carry their
// secrets (delivery signs with them): the edge never shows them.
//
// Thread safety: every method may be called from any thread; each answers from one snapshot.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "store/lists.h"
#include "webhooks/webhook.h"

namespace tollgate::webhooks {

class WebhookReads {
 public:
  virtual ~WebhookReads() = default;
  // The endpoint, or not_found.
  virtual Result<Endpoint> get_endpoint(std::string_view endpoint_id) = 0;
  // Endpoints in the order they were made (created_at, then id), after page.starting_after (an
  // endpoint's id; one that names none: invalid_request), at most page.limit.
  virtual Result<Page<Endpoint>> list_endpoints(const PageRequest& page) = 0;

  // The endpoint's deliveries, newest event first, only those in `status` when set, after
  // page.starting_after (a delivery's webhook-id, "evt_<event_id>", of this endpoint; one that names
  // none: invalid_request), at most page.limit. not_found: no such endpoint.
  virtual Result<Page<Delivery>> list_deliveries(std::string_view endpoint_id, std::optional<DeliveryStatus> status,
                                                 const PageRequest& page) = 0;
  // Pending deliveries (every endpoint's) whose next attempt is due at the store's clock, earliest
  // first, at most `limit`: what the deliverer retries.
  virtual Result<std::vector<Delivery>> due_deliveries(std::int64_t limit) = 0;
  // When the oldest event with a pending delivery to the endpoint happened (its at_ms), or nullopt.
  virtual Result<std::optional<std::int64_t>> oldest_pending_event_at(std::string_view endpoint_id) = 0;
};

}  // namespace tollgate::webhooks

// tollgate webhooks: the reads of webhook endpoints, as one narrow interface every store backend
// implements (a role of the store, like jobs/job_store.h). The rows are written through the
// store's batches (webhooks/webhook_batch.h); this interface only reads. The rows read carry their
// secrets (delivery signs with them): the edge never shows them.
//
// Thread safety: every method may be called from any thread; each answers from one snapshot.
#pragma once

#include <string_view>

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
};

}  // namespace tollgate::webhooks

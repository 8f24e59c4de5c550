#include "store/lists.h"

#include <string>

namespace tollgate {

Status validate_page(const PageRequest& page) {
  if (page.limit < 1 || page.limit > limits::kListPageMax) {
    return invalid("limit must be from 1 to " + std::to_string(limits::kListPageMax) + ", not " +
                   std::to_string(page.limit));
  }
  if (page.starting_after && page.starting_after->empty()) {
    return invalid("starting_after must be the id of the last item of the previous page, not empty");
  }
  return ok_status();
}

Error unknown_cursor(std::string_view what, std::string_view id) {
  return invalid("starting_after: " + std::string(what) + " " + std::string(id) +
                 " is not in this list (pass the id of the last item of the previous page)");
}

std::size_t HoldQueryShape::index() const {
  return (by_account ? 1 : 0) + (by_request ? 2 : 0) + 4 * static_cast<std::size_t>(status);
}

HoldQueryShape HoldQueryShape::of(std::size_t index) {
  TG_ASSERT(index < kHoldQueryShapes);
  return HoldQueryShape{(index & 1) != 0, (index & 2) != 0, static_cast<HoldStatusFilter>(index / 4)};
}

HoldQueryShape HoldQueryShape::of(const HoldQuery& query) {
  HoldQueryShape shape{query.account_id.has_value(), query.request_id.has_value(), HoldStatusFilter::any};
  if (query.status) {
    shape.status = *query.status == HoldStatus::active    ? HoldStatusFilter::live
                   : *query.status == HoldStatus::expired ? HoldStatusFilter::expired_or_overdue
                                                          : HoldStatusFilter::stored;
  }
  return shape;
}

Error transfer_not_found(std::string_view reference) {
  return Error::make(Code::not_found, "no credit or debit has the reference " + std::string(reference));
}

}  // namespace tollgate

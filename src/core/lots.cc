// Credit lots (see lots.h).
#include "core/lots.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <limits>
#include <utility>

#include "core/result.h"

namespace tollgate::lots {
namespace {

__extension__ using Wide = __int128;  // GCC's and Clang's (no warning under -Wpedantic)

constexpr std::array<std::pair<LotStatus, std::string_view>, 3> kStatuses{{
    {LotStatus::active, "active"},
    {LotStatus::expired, "expired"},
    {LotStatus::spent, "spent"},
}};

Lot* find(std::span<Lot* const> lots, std::int64_t seq) {
  for (Lot* lot : lots) {
    if (lot->seq == seq) return lot;
  }
  TG_ASSERT(false && "a hold's lot is loaded with it");
  return nullptr;
}

// Credits leaving a lot's `reserved` or `used` go back: to available, or to expired once it is overdue.
void give_back_to(Lot& lot, std::int64_t n, std::int64_t now_ms, GivenBack& out) {
  if (is_overdue(lot, now_ms)) {
    lot.expired += n;
    out.to_expired += n;
  } else {
    lot.available += n;
    out.to_available += n;
  }
}

void take(Lot& lot, std::int64_t n, DrawUse use) {
  TG_ASSERT(n >= 1 && n <= lot.available);
  lot.available -= n;
  switch (use) {
    case DrawUse::reserve: lot.reserved += n; return;
    case DrawUse::charge: lot.used += n; return;
    case DrawUse::remove: lot.amount -= n; return;
  }
}

std::vector<Lot*> in_spending_order(std::span<Lot* const> lots) {
  std::vector<Lot*> sorted(lots.begin(), lots.end());
  std::sort(sorted.begin(), sorted.end(), [](const Lot* a, const Lot* b) { return spends_before(*a, *b); });
  return sorted;
}

// The part of `committed` each draw charged (in draw order; what is left was the base's).
std::vector<std::int64_t> charged_parts(std::span<const LotDraw> draws, std::int64_t committed) {
  std::vector<std::int64_t> parts;
  parts.reserve(draws.size());
  for (const LotDraw& d : draws) {
    const std::int64_t part = std::min(d.amount, committed);
    parts.push_back(part);
    committed -= part;
  }
  return parts;
}

}  // namespace

bool spends_before(const Lot& a, const Lot& b) {
  if (a.terms.priority != b.terms.priority) return a.terms.priority < b.terms.priority;
  constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();
  const std::int64_t ea = a.terms.expires_at_ms.value_or(kNever);
  const std::int64_t eb = b.terms.expires_at_ms.value_or(kNever);
  if (ea != eb) return ea < eb;
  return a.seq < b.seq;
}

std::string_view lot_status_name(LotStatus status) {
  for (const auto& [s, name] : kStatuses) {
    if (s == status) return name;
  }
  return "";
}

std::optional<LotStatus> parse_lot_status(std::string_view name) {
  for (const auto& [s, text] : kStatuses) {
    if (text == name) return s;
  }
  return std::nullopt;
}

LotStatus status(const Lot& lot, std::int64_t now_ms) {
  if (is_overdue(lot, now_ms)) return LotStatus::expired;
  return lot.available > 0 || lot.reserved > 0 ? LotStatus::active : LotStatus::spent;
}

LotView lot_view(Lot lot, std::int64_t now_ms, std::int64_t held_by_overdue_holds) {
  TG_ASSERT(held_by_overdue_holds >= 0 && held_by_overdue_holds <= lot.reserved);
  lot.reserved -= held_by_overdue_holds;
  if (is_overdue(lot, now_ms)) {
    lot.expired += held_by_overdue_holds;
  } else {
    lot.available += held_by_overdue_holds;
  }
  const LotStatus s = status(lot, now_ms);
  if (is_overdue(lot, now_ms)) expire(lot);
  return LotView{std::move(lot), s};
}

Account account_view(Account account, std::int64_t overdue_lots_available, std::int64_t overdue_holds_from_overdue_lots) {
  const std::int64_t n = overdue_lots_available + overdue_holds_from_overdue_lots;  // each ≤ the account's purchased
  TG_ASSERT(overdue_lots_available >= 0 && overdue_holds_from_overdue_lots >= 0);
  account.balances.available -= n;
  account.balances.expired += n;
  return account;
}

std::int64_t expire(Lot& lot) {
  const std::int64_t n = lot.available;
  TG_ASSERT(n >= 0);
  lot.available = 0;
  lot.expired += n;  // ≤ amount: no overflow
  return n;
}

std::vector<LotDraw> draw(std::span<Lot* const> lots, std::int64_t amount, DrawUse use, std::int64_t now_ms) {
  TG_ASSERT(amount >= 0);
  std::vector<LotDraw> draws;
  for (Lot* lot : in_spending_order(lots)) {
    if (amount == 0) break;
    if (lot->available <= 0 || is_overdue(*lot, now_ms)) continue;
    const std::int64_t n = std::min(lot->available, amount);
    take(*lot, n, use);
    draws.push_back(LotDraw{lot->seq, n});
    amount -= n;
  }
  return draws;
}

std::vector<LotDraw> draw_first_from(std::span<Lot* const> lots, std::int64_t first, std::int64_t amount,
                                     DrawUse use, std::int64_t now_ms) {
  std::vector<LotDraw> draws;
  std::vector<Lot*> others;
  for (Lot* lot : lots) {
    if (lot->seq != first) {
      others.push_back(lot);
    } else if (lot->available > 0 && !is_overdue(*lot, now_ms) && amount > 0) {
      const std::int64_t n = std::min(lot->available, amount);
      take(*lot, n, use);
      draws.push_back(LotDraw{lot->seq, n});
      amount -= n;
    }
  }
  for (const LotDraw& d : draw(others, amount, use, now_ms)) draws.push_back(d);
  return draws;
}

GivenBack end_hold(std::span<Lot* const> lots, std::span<const LotDraw> draws, std::int64_t held,
                   std::int64_t committed, std::int64_t now_ms) {
  TG_ASSERT(committed >= 0 && committed <= held);
  GivenBack out;
  std::int64_t from_lots = 0;
  const std::vector<std::int64_t> charged = charged_parts(draws, committed);
  for (std::size_t i = 0; i < draws.size(); ++i) {
    Lot& lot = *find(lots, draws[i].lot_seq);
    TG_ASSERT(lot.reserved >= draws[i].amount);
    lot.reserved -= draws[i].amount;
    lot.used += charged[i];
    if (draws[i].amount > charged[i]) give_back_to(lot, draws[i].amount - charged[i], now_ms, out);
    from_lots += draws[i].amount;
  }
  TG_ASSERT(from_lots <= held);
  std::int64_t charged_lots = 0;
  for (const std::int64_t c : charged) charged_lots += c;
  // The base's part: charged after the lots; the rest back to its available (it never expires).
  out.to_available += (held - from_lots) - (committed - charged_lots);
  return out;
}

GivenBack refund(std::span<Lot* const> lots, std::span<const LotDraw> draws, std::int64_t committed,
                 std::int64_t refunded_before, std::int64_t amount, std::int64_t now_ms) {
  TG_ASSERT(refunded_before >= 0 && amount >= 0 && refunded_before + amount <= committed);
  const std::vector<std::int64_t> charged = charged_parts(draws, committed);
  std::int64_t charged_lots = 0;
  for (const std::int64_t c : charged) charged_lots += c;
  // Last charged first: the base's part, then the lots in reverse. `skip` is what earlier refunds gave.
  std::int64_t skip = refunded_before;
  GivenBack out;
  const auto give = [&](std::int64_t part, Lot* lot) {
    const std::int64_t skipped = std::min(part, skip);
    skip -= skipped;
    const std::int64_t n = std::min(part - skipped, amount);
    if (n == 0) return;
    amount -= n;
    if (lot == nullptr) {
      out.to_available += n;
      return;
    }
    TG_ASSERT(lot->used >= n);
    lot->used -= n;
    give_back_to(*lot, n, now_ms, out);
  };
  give(committed - charged_lots, nullptr);
  for (std::size_t i = draws.size(); i-- > 0;) {
    if (charged[i] > 0) give(charged[i], find(lots, draws[i].lot_seq));
  }
  TG_ASSERT(amount == 0);
  return out;
}

CreditSplit credit_split(std::int64_t amount, std::int64_t base_available) {
  TG_ASSERT(amount >= 1);
  const std::int64_t debt = base_available < 0 ? -base_available : 0;
  const std::int64_t pays = std::min(amount, debt);
  return CreditSplit{pays, amount - pays};
}

std::int64_t base_available(const Balances& account, std::span<Lot* const> lots) {
  std::int64_t in_lots = 0;
  // Cannot overflow: the sum is the account's available minus the base's, both within ±(kBalanceMax +
  // kOverdraftLimitMax) (a lot's available only ever comes from the account's).
  for (const Lot* lot : lots) in_lots += lot->available;
  return account.available - in_lots;
}

std::optional<std::string> check_lot(const Lot& lot) {
  const std::string id = lot_id(lot.seq);
  if (lot.available < 0 || lot.reserved < 0 || lot.used < 0 || lot.expired < 0) {
    return "lot " + id + " has a negative balance";
  }
  const Wide sum = Wide{lot.available} + lot.reserved + lot.used + lot.expired;
  if (sum != lot.amount) {
    return "lot " + id + ": available + reserved + used + expired != amount (" + std::to_string(lot.available) + " + " +
           std::to_string(lot.reserved) + " + " + std::to_string(lot.used) + " + " + std::to_string(lot.expired) +
           " != " + std::to_string(lot.amount) + ")";
  }
  return std::nullopt;
}

std::optional<std::string> check_account_lots(const Account& account, std::span<const Lot> lots) {
  Wide reserved = 0, used = 0, expired = 0;
  for (const Lot& lot : lots) {
    if (lot.account_id != account.account_id) return "lot " + lot_id(lot.seq) + " is not account " + account.account_id + "'s";
    if (auto bad = check_lot(lot)) return bad;
    reserved += lot.reserved;
    used += lot.used;
    expired += lot.expired;
  }
  const Balances& b = account.balances;
  if (expired != b.expired) {
    return "account " + account.account_id + ": expired " + std::to_string(b.expired) +
           " is not the sum of its lots' expired";
  }
  if (reserved > b.reserved || used > b.used) {
    return "account " + account.account_id + ": its lots hold more reserved or used credits than it does";
  }
  return std::nullopt;
}

std::string draws_text(std::span<const LotDraw> draws) {
  std::string out;
  for (const LotDraw& d : draws) {
    if (!out.empty()) out += ',';
    out += std::to_string(d.lot_seq) + ':' + std::to_string(d.amount);
  }
  return out;
}

std::optional<std::vector<LotDraw>> parse_draws(std::string_view text) {
  std::vector<LotDraw> out;
  if (text.empty()) return out;
  while (true) {
    const std::size_t end = std::min(text.find(','), text.size());
    const std::string_view item = text.substr(0, end);
    const std::size_t colon = item.find(':');
    if (colon == std::string_view::npos) return std::nullopt;
    LotDraw d;
    const auto number = [](std::string_view s, std::int64_t& v) {
      const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
      return ec == std::errc() && p == s.data() + s.size() && v >= 1;
    };
    if (!number(item.substr(0, colon), d.lot_seq) || !number(item.substr(colon + 1), d.amount)) return std::nullopt;
    out.push_back(d);
    if (end == text.size()) return out;
    text.remove_prefix(end + 1);
  }
}

}  // namespace tollgate::lots

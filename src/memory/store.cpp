#include "store.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <string_view>

namespace redlimit::detail::memory {

// ---------------------------------------------------------------------------------------------
// UnitLog

namespace {

// The decimal text of a sequence number, as fmt(seq) writes it into the member.
struct Digits {
  std::array<char, 24> buf{};
  std::size_t len = 0;
  explicit Digits(std::int64_t v) {
    const auto res = std::to_chars(buf.data(), buf.data() + buf.size(), v);
    len = static_cast<std::size_t>(res.ptr - buf.data());
  }
  std::string_view view() const { return {buf.data(), len}; }
};

// Redis orders sorted-set members by score, then by member bytes. Members of one score share the
// "<time>:" prefix, so the tie is decided by the bytes of the sequence numbers.
bool member_less(const LogUnit& a, const LogUnit& b) {
  if (a.time != b.time) return a.time < b.time;
  if (a.seq == b.seq) return false;
  return Digits(a.seq).view() < Digits(b.seq).view();
}

}  // namespace

std::size_t UnitLog::lower_index(std::int64_t time_after) const {
  const auto it = std::upper_bound(units_.begin() + static_cast<std::ptrdiff_t>(head_), units_.end(), time_after,
                                   [](std::int64_t t, const LogUnit& u) { return t < u.time; });
  return static_cast<std::size_t>(it - units_.begin());
}

// Units leave from the front (the trim) far more often than anything else happens: they are only
// skipped, and the vector is compacted once the skipped part is at least half of it.
void UnitLog::compact() {
  if (head_ == units_.size()) {
    units_.clear();
    head_ = 0;
  } else if (head_ >= 64 && head_ * 2 >= units_.size()) {
    units_.erase(units_.begin(), units_.begin() + static_cast<std::ptrdiff_t>(head_));
    head_ = 0;
  }
}

void UnitLog::remove_through(std::int64_t cutoff) {
  head_ = lower_index(cutoff);
  compact();
}

void UnitLog::pop_max(std::int64_t n) {
  for (std::int64_t i = 0; i < n && !empty(); ++i) units_.pop_back();
  compact();
}

std::size_t UnitLog::count_after(std::int64_t cutoff) const { return units_.size() - lower_index(cutoff); }

std::optional<std::int64_t> UnitLog::rev_score(std::int64_t k) const {
  const auto n = static_cast<std::int64_t>(size());
  const std::int64_t rank = k < 0 ? n + k : k;  // from the newest
  if (rank < 0 || rank >= n) return std::nullopt;
  return units_[units_.size() - 1 - static_cast<std::size_t>(rank)].time;
}

bool UnitLog::add_nx(std::int64_t time, std::int64_t seq) {
  const LogUnit u{time, seq};
  if (empty() || member_less(units_.back(), u)) {
    units_.push_back(u);
    return true;
  }
  const auto it =
      std::lower_bound(units_.begin() + static_cast<std::ptrdiff_t>(head_), units_.end(), u, member_less);
  if (it != units_.end() && !member_less(u, *it)) return false;  // the member exists
  units_.insert(it, u);
  return true;
}

// ---------------------------------------------------------------------------------------------
// Strings

State string_state(const std::string& bytes) {
  std::int64_t v = 0;
  const auto res = std::from_chars(bytes.data(), bytes.data() + bytes.size(), v);
  if (!bytes.empty() && res.ec == std::errc() && res.ptr == bytes.data() + bytes.size()) return Marker{v};
  const auto read = [&](std::size_t from, std::size_t n) {
    std::int64_t x = 0;
    for (std::size_t i = n; i-- > 0;) x = (x << 8) | static_cast<unsigned char>(bytes[from + i]);
    return x;
  };
  if (bytes.size() == 12 || bytes.size() == 15) return Packed{read(0, 7), read(7, bytes.size() - 7)};
  if (bytes.size() == 20) return Packed{read(0, 7), read(7, 6), 0, read(13, 7), Packed::Layout::window};
  if (bytes.size() == 27) return Packed{read(0, 7), read(7, 6), read(13, 7), read(20, 7), Packed::Layout::bucket};
  return Text{bytes};
}

// ---------------------------------------------------------------------------------------------
// KeyRef

KeyRef::KeyRef(Table& table, const std::string& key, std::int64_t now) : table_(&table), key_(&key) {
  const auto it = table.find(key);
  if (it == table.end()) return;
  if (it->second.expired(now)) {
    table.erase(it);
    return;
  }
  entry_ = &it->second;
}

Entry& KeyRef::create(State state) {
  if (entry_ == nullptr) entry_ = &(*table_)[*key_];
  entry_->state = std::move(state);
  entry_->deadline = kNoDeadline;
  return *entry_;
}

void KeyRef::set(State state, std::int64_t now, std::int64_t ttl_ms) {
  create(std::move(state));
  expire_ms(now, ttl_ms);
}

void KeyRef::expire_ms(std::int64_t now, std::int64_t ttl_ms) {
  if (entry_ != nullptr) entry_->deadline = now + ttl_ms * 1000;
}

void KeyRef::erase() {
  if (entry_ == nullptr) return;
  table_->erase(*key_);
  entry_ = nullptr;
}

}  // namespace redlimit::detail::memory

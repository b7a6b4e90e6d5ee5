#include "store.hpp"

#include <algorithm>
#include <charconv>
#include <string_view>

namespace redlimit::detail::memory {

// ---------------------------------------------------------------------------------------------
// EntryLog

const LogEntry* EntryLog::at(std::int64_t rank) const {
  const auto n = static_cast<std::int64_t>(size());
  const std::int64_t r = rank < 0 ? n + rank : rank;
  if (r < 0 || r >= n) return nullptr;
  return &entries_[head_ + static_cast<std::size_t>(r)];
}

std::size_t EntryLog::first_after(std::int64_t cutoff) const {
  const auto it = std::upper_bound(entries_.begin() + static_cast<std::ptrdiff_t>(head_), entries_.end(), cutoff,
                                   [](std::int64_t t, const LogEntry& e) { return t < e.time; });
  return static_cast<std::size_t>(it - entries_.begin());
}

// Entries leave from the front (the trim) far more often than anything else happens: they are only
// skipped, and the vector is compacted once the skipped part is at least half of it.
void EntryLog::compact() {
  if (head_ == entries_.size()) {
    entries_.clear();
    head_ = 0;
  } else if (head_ >= 64 && head_ * 2 >= entries_.size()) {
    entries_.erase(entries_.begin(), entries_.begin() + static_cast<std::ptrdiff_t>(head_));
    head_ = 0;
  }
}

void EntryLog::remove_through(std::int64_t cutoff, std::size_t most) {
  head_ += std::min(count_through(cutoff), most);
  compact();
}

std::size_t EntryLog::count_through(std::int64_t cutoff) const { return first_after(cutoff) - head_; }

LogEntry EntryLog::pop_newest() {
  const LogEntry e = entries_.back();
  entries_.pop_back();
  compact();
  return e;
}

// ---------------------------------------------------------------------------------------------
// Strings

State string_state(const std::string& bytes) {
  std::int64_t v = 0;
  const auto res = std::from_chars(bytes.data(), bytes.data() + bytes.size(), v);
  if (!bytes.empty() && res.ec == std::errc() && res.ptr == bytes.data() + bytes.size()) return Marker{v};
  // Little-endian, unsigned as struct.unpack's I reads it. Every field is 7 bytes or fewer, so it
  // fits, but pack2's 8-byte quantity ('<I7I8'), which the scripts read as a double: past 2^53,
  // where no client wrote one and the double is no longer exact, it is held at 2^53 (the twins'
  // int64 math adds costs to it; another program's bytes reached 2^63 and read negative).
  const auto read = [&](std::size_t from, std::size_t n) {
    std::uint64_t x = 0;
    for (std::size_t i = n; i-- > 0;) x = (x << 8) | static_cast<unsigned char>(bytes[from + i]);
    return static_cast<std::int64_t>(std::min<std::uint64_t>(x, n < 8 ? x : std::uint64_t{1} << 53));
  };
  constexpr std::size_t kBlock = 9;  // pack('<I7', blocked until) .. 'BK'
  const std::size_t n = bytes.size();
  if (n >= kBlock && bytes.compare(n - 2, 2, "BK") == 0) {
    if (n == kBlock) return Packed{0, 0, 0, 0, Packed::Layout::none, -1, read(n - kBlock, 7)};
    State state = string_state(bytes.substr(0, n - kBlock));
    if (auto* p = std::get_if<Packed>(&state)) {
      if (n == 21 || n == 24 || n == 29 || n == 36 || n == 37) {
        p->blocked_until = read(n - kBlock, 7);
        return state;
      }
    }
  }
  if (bytes.size() == 12 || bytes.size() == 15) return Packed{read(0, 7), read(7, bytes.size() - 7)};
  if (bytes.size() == 20) return Packed{read(0, 7), read(7, 6), 0, read(13, 7), Packed::Layout::window};
  if (bytes.size() == 27 || bytes.size() == 28) {
    return Packed{read(0, 7),  read(7, 6), read(13, 7), read(20, 7), Packed::Layout::bucket,
                  bytes.size() == 28 ? read(27, 1) : -1};
  }
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

void KeyRef::set_keep_ttl(State state) {
  const std::int64_t deadline = entry_ != nullptr ? entry_->deadline : kNoDeadline;
  create(std::move(state));
  entry_->deadline = deadline;
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

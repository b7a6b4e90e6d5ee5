#pragma once
// The opt-in local cache of subjects known to be over their limit (Options::local_reject_cache):
// after Redis rejects `cost` units with a retry_after, further requests for at least that cost are
// rejected in-process until then, so a flood from one subject costs Redis nothing. Admissions are
// never cached: every admitted request is still decided by Redis. Sharded, bounded, and a request
// cheaper than the cached rejection still goes to Redis (it may fit). Its times are the clock's
// monotonic() readings (clock.hpp): a rejection stands for its retry_after of elapsed time, however
// the wall clock is stepped meanwhile.
#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

namespace redlimit::detail {

class RejectCache {
 public:
  explicit RejectCache(std::size_t max_entries) : max_per_shard_(max_entries / kShards + 1) {}

  // The wait left if `key` was rejected for a cost <= `cost` and that rejection still stands.
  std::optional<std::chrono::microseconds> lookup(const std::string& key, std::int64_t cost,
                                                  std::chrono::microseconds now) {
    Shard& s = shard(key);
    std::lock_guard<std::mutex> lock(s.mutex);
    const auto it = s.map.find(key);
    if (it == s.map.end()) return std::nullopt;
    if (it->second.until <= now) {
      s.map.erase(it);
      return std::nullopt;
    }
    if (cost < it->second.cost) return std::nullopt;
    return it->second.until - now;
  }

  void remember(const std::string& key, std::int64_t cost, std::chrono::microseconds until,
                std::chrono::microseconds now) {
    Shard& s = shard(key);
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.map.size() >= max_per_shard_ && s.map.find(key) == s.map.end()) {
      for (auto it = s.map.begin(); it != s.map.end();) it = it->second.until <= now ? s.map.erase(it) : std::next(it);
      if (s.map.size() >= max_per_shard_) return;  // full of live rejections: Redis keeps deciding
    }
    s.map[key] = Entry{until, cost};
  }

  void forget(const std::string& key) {
    Shard& s = shard(key);
    std::lock_guard<std::mutex> lock(s.mutex);
    s.map.erase(key);
  }

  std::size_t size() {
    std::size_t n = 0;
    for (auto& s : shards_) {
      std::lock_guard<std::mutex> lock(s.mutex);
      n += s.map.size();
    }
    return n;
  }

 private:
  static constexpr std::size_t kShards = 16;
  struct Entry {
    std::chrono::microseconds until;
    std::int64_t cost;
  };
  struct Shard {
    std::mutex mutex;
    std::unordered_map<std::string, Entry> map;
  };
  Shard& shard(const std::string& key) { return shards_[std::hash<std::string>{}(key) % kShards]; }

  std::size_t max_per_shard_;
  std::array<Shard, kShards> shards_;
};

}  // namespace redlimit::detail

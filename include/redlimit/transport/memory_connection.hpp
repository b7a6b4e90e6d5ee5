#pragma once
// The in-memory backend: a Connection that answers the commands redlimit's strategies send
// (EVALSHA, EVAL, DEL or UNLINK, PING) by running C++ twins of the Lua scripts on a process-local store.
// RateLimiter::in_memory() builds one; every strategy and policy then decides exactly as on Redis,
// with no server. What holds them together: tests/golden/*.trace, recorded from a real Redis and
// replayed against this backend by the unit suite (tests/unit/golden_test.cpp), and the live
// differential test (tests/integration/differential_test.cpp), which replays random traces of single
// calls and consume_many batches against both.
//
//   auto clock = std::make_shared<redlimit::ManualClock>();
//   auto store = std::make_shared<redlimit::MemoryConnection>(clock);
//   redlimit::Options options;
//   options.clock = clock;
//   redlimit::RateLimiter limiter(store, options);  // or RateLimiter::in_memory(options)
//
// Thread-safe without a global lock: keys live in shard_count() shards, each a mutex and a hash
// table, chosen by the key's hash tag (the "{...}" part), so a subject's state and its block marker
// share a shard. A script call locks every shard its keys live in (in increasing order: no deadlock)
// for the whole call and reads the clock once, so a consume_many batch is one atomic step, as one
// script run is on Redis: each request sees the writes of those before it, and a string state
// (fixed window, buckets) is written only once every request of the call has been decided.
//
// Expiry: where a script sets a TTL, the entry gets a deadline on the limiter's clock (the clock given
// here, the same one that timestamps decisions; a ManualClock in tests). An entry past its deadline is
// treated as missing, which changes no decision (every script's state is stale by then). Memory stays
// bounded by the live subjects: an expired entry is evicted when its key is next touched, and every
// operation also sweeps sweep_buckets() buckets of the shard it touched, and every sweep_every()-th
// operation sweep_buckets() buckets of the next shard in turn, so that expired entries go even from
// shards nobody touches. sweep() evicts everything expired at once.
//
// Differences from Redis: only redlimit's own scripts can run (EVALSHA of another SHA answers
// NOSCRIPT, EVAL of another source an error), other commands answer "ERR unknown command", and an
// error inside a script says what the script hit (WRONGTYPE ..., ERR ...) without Redis's
// "user_script:<line>" suffix. A key holding another kind of value reads as on Redis (MGET sees a
// hash or a sorted set as nil; HGETALL or ZCARD on another kind is WRONGTYPE).
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "redlimit/clock.hpp"
#include "redlimit/transport/connection.hpp"

namespace redlimit {

class MemoryConnection final : public Connection {
 public:
  // `clock` decides expiry and stands in for Redis TIME; nullptr = SystemClock::instance(). Give it
  // the limiter's clock (Options::clock).
  explicit MemoryConnection(std::shared_ptr<Clock> clock = nullptr);
  ~MemoryConnection() override;
  MemoryConnection(const MemoryConnection&) = delete;
  MemoryConnection& operator=(const MemoryConnection&) = delete;

  bool thread_safe() const override { return true; }

  // EVALSHA sha numkeys key... arg...  runs the twin of the script with that SHA1 (NOSCRIPT for any
  //                                    other SHA1, as Redis answers for a script it has not cached);
  // EVAL source numkeys key... arg...  the same, knowing the script by its source;
  // DEL key... (or UNLINK key...)     integer: how many of the keys existed (and were not expired);
  // SET key value [PX ms]              OK (what tests use to put a value of the wrong kind or
  //                                     length under a key; PX gives it a TTL, as on Redis);
  // PING [message]                      PONG.
  // Anything else: an error reply "ERR unknown command ...".
  Reply command(const std::vector<std::string>& argv) override;

  // Entries held, including expired ones not yet evicted: what the store costs in memory.
  std::size_t size() const;
  // Evicts every expired entry now (one shard at a time); returns how many.
  std::size_t sweep();
  // When `key` expires (on the clock's timeline), for a key that exists and has not expired;
  // Micros::max() for a key without a TTL.
  std::optional<Micros> expires_at(const std::string& key) const;
  const std::shared_ptr<Clock>& clock() const { return clock_; }

  static constexpr std::size_t shard_count() { return 64; }
  static constexpr std::size_t sweep_buckets() { return 16; }
  static constexpr std::size_t sweep_every() { return 8; }
  // The shard of a key: a hash of its hash tag (the whole key when it has none).
  static std::size_t shard_of(std::string_view key);

 private:
  struct Shard;
  class ShardLocks;
  Reply eval(const std::vector<std::string>& argv, bool by_sha);
  Reply del(const std::vector<std::string>& argv);
  Reply set(const std::vector<std::string>& argv);
  void after_operation();

  std::shared_ptr<Clock> clock_;
  std::unique_ptr<Shard[]> shards_;
  std::atomic<std::uint64_t> operations_{0};
};

}  // namespace redlimit

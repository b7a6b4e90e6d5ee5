#pragma once
// A gmock stand-in for Redis behind the Connection seam, and small helpers to build replies.
#include <gmock/gmock.h>

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "redlimit/transport/connection.hpp"
#include "redlimit/decision.hpp"
#include "redlimit/reply.hpp"
#include "redlimit/strategy.hpp"
#include "redlimit/transport/connection.hpp"

namespace redlimit {
// Readable gtest output for Decision::source.
inline void PrintTo(Source s, std::ostream* os) {
  switch (s) {
    case Source::primary:
      *os << "Source::primary";
      return;
    case Source::fallback:
      *os << "Source::fallback";
      return;
    case Source::failure_policy:
      *os << "Source::failure_policy";
      return;
    case Source::local_cache:
      *os << "Source::local_cache";
      return;
    case Source::lease:
      *os << "Source::lease";
      return;
  }
  *os << "Source(" << static_cast<int>(s) << ")";
}
}  // namespace redlimit

class MockConnection : public redlimit::Connection {
 public:
  MockConnection() {
    // Unless a test says otherwise, pipeline() behaves like the base class: one command() per entry,
    // so expectations on command() still see every command.
    ON_CALL(*this, pipeline(::testing::_)).WillByDefault([this](const std::vector<std::vector<std::string>>& commands) {
      return this->redlimit::Connection::pipeline(commands);
    });
  }

  MOCK_METHOD(redlimit::Reply, command, (const std::vector<std::string>&), (override));
  // A single server unless a test says it stands for a cluster.
  bool scripts_span_slots() const override { return span_slots; }
  bool span_slots = true;
  // A cluster router whose masters run the spread functions (off unless a test says so).
  bool scripts_span_node() const override { return span_node; }
  bool span_node = false;
  // One node unless a test maps keys to nodes (a cluster's masters, each with its own breaker).
  std::size_t node_of(std::string_view key) const override { return node_for ? node_for(key) : 0; }
  std::function<std::size_t(std::string_view)> node_for;
  // Every shard serves slots unless a test says which do (a master replaced by a failover does not).
  bool shard_serves(std::size_t shard) const override { return serves ? serves(shard) : true; }
  std::function<bool(std::size_t)> serves;
  MOCK_METHOD(std::vector<redlimit::Reply>, pipeline, (const std::vector<std::vector<std::string>>&), (override));
};

namespace redlimit_unit {

// The reply every strategy script returns: {allowed, remaining, retry_after_us, reset_after_us, delay_us}.
inline redlimit::Reply decision_reply(std::int64_t allowed, std::int64_t remaining, std::int64_t retry_us,
                                      std::int64_t reset_us, std::int64_t delay_us = 0) {
  using redlimit::Reply;
  return Reply::make_array({Reply::make_integer(allowed), Reply::make_integer(remaining), Reply::make_integer(retry_us),
                            Reply::make_integer(reset_us), Reply::make_integer(delay_us)});
}

// The reply of a script call that decided several requests: their decisions one after the other.
inline redlimit::Reply batch_reply(const std::vector<redlimit::Reply>& decisions) {
  redlimit::Reply out = redlimit::Reply::make_array({});
  for (const auto& d : decisions) out.elements.insert(out.elements.end(), d.elements.begin(), d.elements.end());
  return out;
}

// The KEYS a request of `s` sends for `subject` (lua/prologue.lua): its state alone, which holds
// its block (detail::scripts::keys_per_request).
inline std::vector<std::string> request_keys(const redlimit::Strategy& s, std::string_view subject) {
  return {s.key_for(subject)};
}

inline redlimit::Reply noscript_reply() {
  return redlimit::Reply::make_error("NOSCRIPT No matching script. Please use EVAL.");
}

}  // namespace redlimit_unit

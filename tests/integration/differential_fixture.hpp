#pragma once
// The fixture of the differential tests (differential_test.cpp: single calls; differential_batch_test.cpp:
// consume_many): RecordingRedis, the strategies under test, seeds and outcomes.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <typeinfo>
#include <vector>

#include "redlimit/detail/scripts.hpp"
#include "redlimit/transport/memory_connection.hpp"
#include "redlimit/transport/redis_connection.hpp"
#include "support/env_count.hpp"
#include "support/fixture.hpp"

namespace redlimit_test {
// Named, not anonymous: googletest needs one DifferentialTest class across the files of the suite.
namespace differential_fixture {


using redlimit::Reply;

// A Connection to the suite's server that runs every redlimit script (its exact source) inside
//   local redis = <redis, with PEXPIRE and PSETEX recording the TTL instead of setting it, and
//                  PEXPIRE NX taking every key that held anything before the call for one with a TTL
//                  (and so does PTTL on a server older than 7.0, which the scripts ask instead);
//                  and PTTL of a key that held anything before the call answering from the
//                  deadline the last recorded TTL gave it, on the scripts' clock (ARGV[1]), kept in
//                  the hash DEADLINES across calls: block.lua reads a sliding log's PTTL, which the
//                  in-memory twin answers from its own deadline>
//   local function script() <the script's source> end
//   return {script(), <TTL recorded for KEYS[1]>, <for the first request's block marker>}
// where the TTL reported is the one the script set, -1 when it set none, -2 when the key does not
// exist after the script. The block marker is KEYS[2] for block.lua, which takes it; the strategies'
// requests send the state alone, and the marker is named after it (the state's kind replaced by
// "blk", as Strategy::block_key_for names it).
class RecordingRedis final : public redlimit::Connection {
 public:
  explicit RecordingRedis(const std::string& url)
      : conn_(redlimit::parse_url(url), std::chrono::milliseconds(5000), std::chrono::milliseconds(30000)) {
    namespace scripts = redlimit::detail::scripts;
    for (const auto* s : {&scripts::fixed_window(), &scripts::sliding_log(), &scripts::policy(),
                          &scripts::token_bucket(), &scripts::leaky_bucket(), &scripts::block()}) {
      wrapped_[s->sha1] = wrap(s->source, scripts::keys_per_request(*s));
      by_source_[std::string(s->source)] = scripts::keys_per_request(*s);
      // The text without its shebang, as a server older than 7.0 is sent it (Script::legacy_source).
      wrapped_[s->legacy_sha1] = wrap(s->legacy_source, scripts::keys_per_request(*s));
      by_source_[std::string(s->legacy_source)] = scripts::keys_per_request(*s);
    }
  }

  struct Ttls {
    bool valid = false;
    std::int64_t state_ttl_ms = 0;
    std::int64_t block_ttl_ms = 0;
  };

  Reply command(const std::vector<std::string>& argv) override {
    // Every script call, one request or a batch: the TTLs are reported for the first request's keys
    // only.
    if (argv.size() >= 5 && (argv[0] == "EVALSHA" || argv[0] == "EVAL") && argv[2] != "0") {
      std::vector<std::string> eval = argv;
      eval[0] = "EVAL";
      if (argv[0] == "EVALSHA") {
        const auto it = wrapped_.find(argv[1]);
        if (it == wrapped_.end()) return Reply::make_error("NOSCRIPT No matching script. Please use EVAL.");
        eval[1] = it->second;
      } else {
        const auto known = by_source_.find(argv[1]);
        eval[1] = wrap(argv[1], known == by_source_.end() ? 1 : known->second);
      }
      const Reply r = conn_.command(eval);
      if (r.is_error()) return r;
      if (r.type != Reply::Type::array || r.elements.size() != 3) {
        return Reply::make_error("ERR unexpected reply from the wrapped script");
      }
      // A call that set no TTL (-1) leaves what an earlier call of the same operation set: block()
      // runs block.lua, then a peek.
      const bool earlier = last.valid;
      last.valid = true;
      if (!earlier || r.elements[1].integer != -1) last.state_ttl_ms = r.elements[1].integer;
      if (!earlier || r.elements[2].integer != -1) last.block_ttl_ms = r.elements[2].integer;
      return r.elements[0];
    }
    return conn_.command(argv);
  }

  // What the script calls since the caller last cleared it (one operation's) did to the TTLs.
  Ttls last;

 private:
  static std::string wrap(std::string_view source, std::size_t keys_per_request) {
    // A "#!lua ..." line (Redis 7 script flags) must stay the script's first line.
    std::string w;
    if (source.substr(0, 2) == "#!") {
      const std::size_t eol = source.find('\n');
      w.append(source.substr(0, eol));
      source.remove_prefix(eol == std::string_view::npos ? source.size() : eol + 1);
      w += '\n';
    }
    w += R"lua(local real_redis = redis
local DEADLINES = 'redlimit-differential:deadlines'
local function record_ttl(key, ms)
  local now = tonumber(ARGV[1])
  if now then real_redis.call('HSET', DEADLINES, key, string.format('%d', now + ms * 1000)) end
end
local recorded_ttl = {}
local existed = {} -- whether a key held anything when the call first touched it: then it had a TTL
local function touch(key)
  if type(key) == 'string' and existed[key] == nil then existed[key] = real_redis.call('EXISTS', key) == 1 end
end
local redis = setmetatable({
  pcall = function(...)
    touch(select(2, ...))
    return real_redis.pcall(...)
  end,
  call = function(...)
    local a = {...}
    local verb = string.upper(a[1])
    if verb ~= 'TIME' then touch(a[2]) end
    if verb == 'PEXPIRE' and #a == 4 and string.upper(a[4]) == 'NX' then
      -- Every key a script leaves has a TTL: one that held anything before this call has one.
      if real_redis.call('EXISTS', a[2]) == 0 or existed[a[2]] or recorded_ttl[a[2]] then return 0 end
      recorded_ttl[a[2]] = tonumber(a[3])
      record_ttl(a[2], tonumber(a[3]))
      return 1
    end
    if verb == 'PTTL' and existed[a[2]] and real_redis.call('EXISTS', a[2]) == 1 then
      -- A key that held anything before this call: what is left of the deadline its last recorded
      -- TTL gave it, in whole ms, as the twin counts it (a deadline that has passed: 0, where Redis
      -- would have dropped the key and the twin has).
      local deadline, now = tonumber(real_redis.call('HGET', DEADLINES, a[2])), tonumber(ARGV[1])
      if deadline and now then return deadline > now and math.floor((deadline - now) / 1000) or 0 end
    end
    if verb == 'PTTL' and not real_redis.REDIS_VERSION_NUM then
      -- A server older than 7.0 has no PEXPIRE NX: the scripts ask PTTL instead (helpers.lua,
      -- pexpire_nx), which answers as NX above takes it: a key that held anything has a TTL.
      if real_redis.call('EXISTS', a[2]) == 0 then return -2 end
      if existed[a[2]] or recorded_ttl[a[2]] then return recorded_ttl[a[2]] or 1 end
      return -1
    end
    if verb == 'PEXPIRE' and #a == 3 then
      if real_redis.call('EXISTS', a[2]) == 0 then return 0 end
      recorded_ttl[a[2]] = tonumber(a[3])
      record_ttl(a[2], tonumber(a[3]))
      return 1
    end
    if verb == 'PSETEX' and #a == 4 then
      recorded_ttl[a[2]] = tonumber(a[3])
      record_ttl(a[2], tonumber(a[3]))
      return real_redis.call('SET', a[2], a[4])
    end
    if verb == 'DEL' then
      for i = 2, #a do recorded_ttl[a[i]], existed[a[i]] = nil, false end
    end
    if verb == 'DEL' or verb == 'UNLINK' then real_redis.call('HDEL', DEADLINES, unpack(a, 2)) end
    return real_redis.call(...)
  end,
}, {__index = real_redis})
local function redlimit_script()
)lua";
    w.append(source);
    w += R"lua(
end
local reply = redlimit_script()
local function ttl_of(key)
  if real_redis.call('EXISTS', key) == 0 then return -2 end
  return recorded_ttl[key] or -1
end
return {reply, ttl_of(KEYS[1]), ttl_of(@MARKER@)}
)lua";
    const std::string marker = keys_per_request == 2 ? "KEYS[2]" : "(string.gsub(KEYS[1], ':[^:]*$', ':blk'))";
    w.replace(w.find("@MARKER@"), 8, marker);
    return w;
  }

  redlimit::RedisConnection conn_;
  std::map<std::string, std::string, std::less<>> wrapped_;
  std::map<std::string, std::size_t, std::less<>> by_source_;  // each script's keys a request
};

// One strategy object behind a uniform face.
struct Target {
  std::function<Decision(std::string_view, std::int64_t)> consume, peek, refund;
  std::function<Decision(std::string_view, std::int64_t, Micros)> acquire;
  std::function<Decision(std::string_view, Micros)> block;
  std::function<void(std::string_view)> reset;
  std::function<std::string(std::string_view)> key_for, block_key_for;
  std::function<std::vector<Decision>(const std::vector<redlimit::Request>&)> consume_many;
};

template <class S>
Target target(S s) {
  Target t;
  t.consume = [s](std::string_view subject, std::int64_t cost) { return s.consume(subject, cost); };
  t.peek = [s](std::string_view subject, std::int64_t cost) { return s.peek(subject, cost); };
  t.refund = [s](std::string_view subject, std::int64_t cost) { return s.refund(subject, cost); };
  t.acquire = [s](std::string_view subject, std::int64_t cost, Micros max_wait) {
    return s.acquire(subject, cost, max_wait);
  };
  t.block = [s](std::string_view subject, Micros d) { return s.block(subject, d); };
  t.reset = [s](std::string_view subject) { s.reset(subject); };
  t.key_for = [s](std::string_view subject) { return s.key_for(subject); };
  t.block_key_for = [s](std::string_view subject) { return s.block_key_for(subject); };
  t.consume_many = [s](const std::vector<redlimit::Request>& r) { return s.consume_many(r); };
  return t;
}

struct Config {
  std::string name;
  std::int64_t max_cost;      // the least limit: costs are drawn from 1..max_cost
  std::vector<Micros> edges;  // windows and precisions: jumps land on (and around) their multiples
  std::function<Target(const redlimit::RateLimiter&)> make;
  std::size_t limits = 1;     // number of limits (policies): each should decide some rejections
  // The form of the sliding log's entries both limiters are given: Redis writes it; the memory backend
  // keeps no members, but reads the word the option adds to the script's parameters.
  redlimit::SlidingLogMembers members = redlimit::SlidingLogMembers::text;
};

inline std::vector<Config> configs() {
  using redlimit::LeakyMode;
  std::vector<Config> c;
  c.push_back({"fixed_window", 10, {1s}, [](const redlimit::RateLimiter& l) {
                 return target(l.fixed_window("diff", Limit(10, 1s)));
               }});
  c.push_back({"sliding_log", 10, {1s}, [](const redlimit::RateLimiter& l) {
                 return target(l.sliding_log("diff", Limit(10, 1s)));
               }});
  // limit / 8 = 5: the entries that left are trimmed by every admission that crosses a multiple of 5
  // units (sliding_log.lua), not by each one.
  c.push_back({"sliding_log_lazy_trim", 10, {1s}, [](const redlimit::RateLimiter& l) {
                 return target(l.sliding_log("diff", Limit(40, 1s)));
               }});
  c.push_back({"sliding_log_compact",
               10,
               {1s},
               [](const redlimit::RateLimiter& l) { return target(l.sliding_log("diff", Limit(10, 1s))); },
               1,
               redlimit::SlidingLogMembers::compact});
  c.push_back({"sliding_window_precision_eq_window", 10, {1s}, [](const redlimit::RateLimiter& l) {
                 return target(l.sliding_window("diff", Limit(10, 1s)));
               }});
  c.push_back({"sliding_window_precision_lt_window", 20, {1s, 250ms}, [](const redlimit::RateLimiter& l) {
                 return target(l.sliding_window("diff", Limit(20, 1s), 250ms));
               }});
  c.push_back({"sliding_window_fine_precision", 12, {1min, 5s}, [](const redlimit::RateLimiter& l) {
                 return target(l.sliding_window("diff", Limit(12, 1min), 5s));
               }});
  c.push_back({"token_bucket", 10, {1s}, [](const redlimit::RateLimiter& l) {
                 // 3 tokens per second: 333333.3 us per token, so the script's unit/refill ticks matter.
                 return target(l.token_bucket("diff", 10, 3, 1s));
               }});
  c.push_back({"token_bucket_whole_rate", 5, {200ms}, [](const redlimit::RateLimiter& l) {
                 return target(l.token_bucket("diff", 5, 5, 1s));
               }});
  c.push_back({"leaky_bucket_meter", 10, {1s}, [](const redlimit::RateLimiter& l) {
                 return target(l.leaky_bucket("diff", 10, Limit(4, 1s), LeakyMode::meter));
               }});
  c.push_back({"leaky_bucket_shaper", 10, {1s}, [](const redlimit::RateLimiter& l) {
                 return target(l.leaky_bucket("diff", 10, Limit(7, 3s), LeakyMode::shaper));
               }});
  c.push_back({"policy", 3, {1s, 1min, 1h}, [](const redlimit::RateLimiter& l) {
                 return target(l.policy("diff", redlimit::parse_limits("3/s; 10/min; 20/h@1m")));
               }, 3});
  c.push_back({"policy_fine", 4, {100ms, 1s, 10s}, [](const redlimit::RateLimiter& l) {
                 return target(l.policy("diff", redlimit::parse_limits("4/1s@100ms; 12/10s@1s")));
               }, 2});
  return c;
}

inline std::uint64_t base_seed() {
  if (const char* env = std::getenv("REDLIMIT_DIFF_SEED"); env != nullptr && *env != '\0') {
    return std::strtoull(env, nullptr, 10);
  }
  static const std::uint64_t seed = [] {
    std::random_device rd;
    return (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  }();
  return seed;
}

constexpr int kDefaultDiffSteps = 10000;

inline int steps_per_strategy() {
  return count_from_env("REDLIMIT_DIFF_STEPS", "REDLIMIT_SHORT_DIFF_STEPS", kDefaultDiffSteps);
}

// A call's outcome: its decision, or the exception it threw.
struct Outcome {
  std::optional<Decision> decision;
  std::string error;  // exception type and message
  Micros clock_after{0};
};

template <class F>
Outcome outcome(redlimit::ManualClock& clock, F&& f) {
  Outcome o;
  try {
    o.decision = f();
  } catch (const std::exception& e) {
    o.error = std::string(typeid(e).name()) + ": " + e.what();
  }
  o.clock_after = clock.now();
  return o;
}

inline std::string describe(const Outcome& o) {
  std::ostringstream os;
  if (o.decision) {
    os << *o.decision << " limit_index=" << o.decision->limit_index;
  } else {
    os << "threw " << o.error;
  }
  return os.str();
}

enum class Op { consume, peek, refund, acquire, block, reset };
inline const char* op_name(Op op) {
  switch (op) {
    case Op::consume: return "consume";
    case Op::peek: return "peek";
    case Op::refund: return "refund";
    case Op::acquire: return "acquire";
    case Op::block: return "block";
    case Op::reset: return "reset";
  }
  return "?";
}

class DifferentialTest : public RedisTest, public ::testing::WithParamInterface<std::size_t> {};


}  // namespace differential_fixture
using namespace differential_fixture;  // NOLINT: the test files use the fixture's names
}  // namespace redlimit_test

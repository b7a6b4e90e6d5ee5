#pragma once
// The fixture of the tests every strategy shares (every_strategy_test.cpp: what each one sends, and
// the input it refuses before any I/O; every_strategy_reply_test.cpp: how its replies and failures
// become decisions): one Case per strategy (strategy_fixture.hpp) behind RateLimiter(MockConnection).
#include <string>
#include <string_view>
#include <utility>

#include "unit/strategy_fixture.hpp"

namespace {

class EveryStrategyTest : public StrategyTestBase, public ::testing::TestWithParam<Case> {
 protected:
  const Case& c() const { return GetParam(); }
  const Script& script() const { return c().script(); }
  Strategy make(const RateLimiter& l, std::string resource = "api") const { return c().make(l, std::move(resource)); }
  // A request's KEYS (its state, which holds its block), and a subject's every key, as block.lua
  // and reset() name them.
  static Argv keys(const Strategy& s, std::string_view subject) { return redlimit_unit::request_keys(s, subject); }
  static Argv both_keys(const Strategy& s, std::string_view subject) {
    return {s.key_for(subject), s.block_key_for(subject)};
  }
  Argv args(const std::string& now_arg, std::int64_t cost, const char* mode) const {
    return call_args(now_arg, cost, mode, c().params);
  }
  Reply reply(std::int64_t allowed, std::int64_t remaining, std::int64_t retry_us, std::int64_t reset_us,
              std::int64_t delay_us = 0) const {
    Reply r = decision_reply(allowed, remaining, retry_us, reset_us, delay_us);
    if (c().policy_reply) {  // the deciding limit, then its own remaining and reset
      for (const std::int64_t v : {std::int64_t{1}, remaining, reset_us}) r.elements.push_back(Reply::make_integer(v));
    }
    return r;
  }
};

}  // namespace

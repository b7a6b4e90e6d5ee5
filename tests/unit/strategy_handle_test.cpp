// Strategy as a handle a service keeps: its kinds held together through Strategy pointers and
// deleted through them, copied and moved. Before the destructor was virtual, deleting a Policy
// through a std::unique_ptr<Strategy> left its limits unfreed and a FixedWindow's deletion was
// undefined: the sanitizer builds of CI (ASan's new-delete-type-mismatch, LeakSanitizer) fail on
// the test below then; the static_asserts fail to compile.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "redlimit/redlimit.hpp"

namespace {

using redlimit::Limit;
using redlimit::ManualClock;
using redlimit::Micros;
using redlimit::Options;
using redlimit::RateLimiter;
using redlimit::Strategy;
using namespace std::chrono_literals;

static_assert(std::has_virtual_destructor_v<Strategy>, "a service may delete its strategies through Strategy*");
static_assert(std::is_nothrow_move_constructible_v<Strategy> && std::is_nothrow_move_assignable_v<Strategy>,
              "moves of a handle stay moves");
static_assert(std::is_nothrow_move_constructible_v<redlimit::Policy>, "and so do a policy's");
static_assert(std::is_copy_constructible_v<Strategy> && std::is_copy_assignable_v<Strategy>, "a handle copies");

RateLimiter memory_limiter() {
  Options o;
  o.clock = std::make_shared<ManualClock>(Micros{1'700'000'000'000'000});
  return RateLimiter::in_memory(o);
}

// Every kind, made by the limiter, kept as a Strategy pointer: each decides as itself (its own
// limit), and each is deleted through the pointer when the vector goes.
TEST(StrategyHandleTest, EveryKindDecidesAndIsDeletedThroughAStrategyPointer) {
  const RateLimiter limiter = memory_limiter();
  std::vector<std::unique_ptr<Strategy>> held;
  held.push_back(std::make_unique<redlimit::FixedWindow>(limiter.fixed_window("fw", Limit(2, 1min))));
  held.push_back(std::make_unique<redlimit::SlidingLog>(limiter.sliding_log("sl", Limit(3, 1min))));
  held.push_back(std::make_unique<redlimit::SlidingWindow>(limiter.sliding_window("sw", Limit(4, 1min), 10s)));
  held.push_back(std::make_unique<redlimit::TokenBucket>(limiter.token_bucket("tb", 5, 1, 1s)));
  held.push_back(std::make_unique<redlimit::LeakyBucket>(limiter.leaky_bucket("lb", 6, Limit(1, 1s))));
  held.push_back(std::make_unique<redlimit::Policy>(limiter.policy("p", redlimit::parse_limits("7/1s; 8/1m"))));
  const std::vector<std::int64_t> limits = {2, 3, 4, 5, 6, 7};
  for (std::size_t i = 0; i < held.size(); ++i) {
    const auto d = held[i]->consume("alice");
    EXPECT_TRUE(d.allowed) << i;
    EXPECT_EQ(d.limit, limits[i]) << i;
    EXPECT_EQ(d.remaining, limits[i] - 1) << i;
  }
  held.erase(held.begin() + 5);  // the policy first: its vector of limits is the derived part
  EXPECT_EQ(held.size(), 5U);
  held.clear();
}

// A handle moves and copies: the moved one, and a sliced copy of it, decide on the same subject's
// state, the copy after every handle it came from is gone.
TEST(StrategyHandleTest, MovesAndCopiesKeepTheSameState) {
  const RateLimiter limiter = memory_limiter();
  auto original = limiter.policy("p", redlimit::parse_limits("3/1m; 10/1h"));
  EXPECT_EQ(original.consume("bob").remaining, 2);
  redlimit::Policy moved(std::move(original));
  EXPECT_EQ(moved.consume("bob").remaining, 1);
  EXPECT_EQ(moved.limits().size(), 2U);
  auto copy = std::make_unique<Strategy>(moved);  // a sliced copy: the base handle alone
  { const redlimit::Policy gone = std::move(moved); }
  const auto d = copy->consume("bob");
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_FALSE(copy->consume("bob").allowed);
}

}  // namespace

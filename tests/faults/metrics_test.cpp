// Shadow mode and the MetricsSink (issue 5): every operation reports one event, errors report the
// exception's message with no decision, shadow mode admits and says what the limit would have done.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "redlimit/redlimit.hpp"
#include "support/redis_server.hpp"

namespace {

using namespace std::chrono_literals;
using redlimit::Decision;
using redlimit::Limit;
using redlimit::Operation;
using redlimit::Source;

constexpr redlimit::Micros kMetricsT0{1'699'999'200'000'000};

struct Event {
  std::string resource;
  Operation operation;
  bool has_decision;
  bool allowed;
  bool shadow_rejected;
  Source source;
  std::string error;
  std::chrono::nanoseconds latency;
};

class RecordingSink : public redlimit::MetricsSink {
 public:
  void on_event(const redlimit::MetricsEvent& e) noexcept override {
    std::lock_guard<std::mutex> lock(mutex_);
    events_.push_back({std::string(e.resource), e.operation, e.decision != nullptr,
                       e.decision != nullptr && e.decision->allowed, e.decision != nullptr && e.decision->shadow_rejected,
                       e.decision != nullptr ? e.decision->source : Source::primary, std::string(e.error), e.latency});
  }
  std::vector<Event> events() {
    std::lock_guard<std::mutex> lock(mutex_);
    return events_;
  }
  std::size_t count(Operation op) {
    std::size_t n = 0;
    for (const auto& e : events()) n += e.operation == op;
    return n;
  }

 private:
  std::mutex mutex_;
  std::vector<Event> events_;
};

TEST(Metrics, ShadowModeAdmitsReportsAndCountsEveryOperation) {
  redlimit_test::RedisServer server;
  auto sink = std::make_shared<RecordingSink>();
  redlimit::Options o;
  o.clock = std::make_shared<redlimit::ManualClock>(kMetricsT0);
  o.shadow = true;
  o.metrics = sink;
  auto limiter = redlimit::RateLimiter::connect(server.url(), o);
  auto fw = limiter.fixed_window("shadow", Limit::per_hour(2));

  std::vector<Decision> d;
  for (int i = 0; i < 4; ++i) d.push_back(fw.consume("u"));
  for (const auto& x : d) {
    EXPECT_TRUE(x.allowed);
    EXPECT_EQ(x.source, Source::primary);
  }
  EXPECT_FALSE(d[0].shadow_rejected);
  EXPECT_FALSE(d[1].shadow_rejected);
  EXPECT_TRUE(d[2].shadow_rejected);
  EXPECT_TRUE(d[3].shadow_rejected);
  EXPECT_GT(d[2].retry_after.count(), 0) << "shadow mode keeps the wait the limit asked for";
  EXPECT_EQ(fw.peek("u").remaining, 0) << "shadow-admitted requests over the limit record nothing";
  fw.refund("u", 1);
  fw.block("u", 1s);
  fw.reset("u");

  const auto c = limiter.counters();
  EXPECT_EQ(c.decisions, 4u);
  EXPECT_EQ(c.allowed, 4u);
  EXPECT_EQ(c.rejected, 0u);
  EXPECT_EQ(c.shadow_rejected, 2u);
  EXPECT_EQ(c.errors, 0u);

  EXPECT_EQ(sink->count(Operation::consume), 4u);
  EXPECT_EQ(sink->count(Operation::peek), 1u);
  EXPECT_EQ(sink->count(Operation::refund), 1u);
  EXPECT_EQ(sink->count(Operation::block), 1u);
  EXPECT_EQ(sink->count(Operation::reset), 1u);
  int shadowed = 0;
  for (const auto& e : sink->events()) {
    EXPECT_EQ(e.resource, "shadow");
    EXPECT_TRUE(e.error.empty()) << e.error;
    EXPECT_GT(e.latency.count(), 0);
    if (e.operation == Operation::consume) {
      EXPECT_TRUE(e.has_decision);
      EXPECT_TRUE(e.allowed);
      shadowed += e.shadow_rejected;
    }
  }
  EXPECT_EQ(shadowed, 2);
}

TEST(Metrics, ErrorsAreReportedWithTheirMessageAndPolicyDecisionsWithTheirSource) {
  redlimit_test::RedisServer server;
  auto raise_sink = std::make_shared<RecordingSink>();
  auto open_sink = std::make_shared<RecordingSink>();
  redlimit::Options o;
  o.command_timeout = 300ms;
  o.connect_timeout = 300ms;
  o.breaker_threshold = 0;
  o.metrics = raise_sink;
  auto raising = redlimit::RateLimiter::connect(server.url(), o);
  o.on_failure = redlimit::OnFailure::fail_open;
  o.metrics = open_sink;
  auto opening = redlimit::RateLimiter::connect(server.url(), o);
  auto a = raising.fixed_window("err", Limit::per_hour(10));
  auto b = opening.fixed_window("err", Limit::per_hour(10));
  ASSERT_TRUE(a.consume("u").allowed);
  ASSERT_TRUE(b.consume("u").allowed);

  server.stop();  // gone: connection refused
  EXPECT_THROW(a.consume("u"), redlimit::ConnectionError);
  const Decision d = b.consume("u");
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.source, Source::failure_policy);

  const auto re = raise_sink->events();
  ASSERT_EQ(re.size(), 2u);
  EXPECT_TRUE(re[0].has_decision);
  EXPECT_FALSE(re[1].has_decision);
  EXPECT_NE(re[1].error.find("connection"), std::string::npos) << re[1].error;
  EXPECT_EQ(raising.counters().errors, 1u);
  EXPECT_EQ(raising.counters().decisions, 1u);

  const auto oe = open_sink->events();
  ASSERT_EQ(oe.size(), 2u);
  EXPECT_TRUE(oe[1].has_decision);
  EXPECT_TRUE(oe[1].allowed);
  EXPECT_EQ(oe[1].source, Source::failure_policy);
  EXPECT_EQ(opening.counters().errors, 1u);
  EXPECT_EQ(opening.counters().from_failure_policy, 1u);
}

}  // namespace

#pragma once
// The fixture shared by the resilience unit tests (failure policy, breaker, observability, reject
// cache): a MockConnection, a ManualClock (and a SteppedClock, whose wall and monotonic times part),
// options per failure policy and a recording metrics sink.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "redlimit/redlimit.hpp"
#include "support/stepped_clock.hpp"
#include "unit/mock_connection.hpp"


// A named namespace, not an anonymous one: googletest needs one ResilienceTest class across the
// test files that share the suite.
namespace resilience_fixture {

using redlimit::ConnectionError;
using redlimit::Counters;
using redlimit::Decision;
using redlimit::InvalidArgument;
using redlimit::Limit;
using redlimit::ManualClock;
using redlimit::Micros;
using redlimit::OnFailure;
using redlimit::Operation;
using redlimit::Options;
using redlimit::RateLimiter;
using redlimit::Reply;
using redlimit::ReplyError;
using redlimit::Source;
using redlimit::TimeoutError;
using redlimit::UnavailableError;
using redlimit_unit::decision_reply;
using ::testing::_;
using ::testing::InSequence;
using ::testing::Return;
using ::testing::StrictMock;
using ::testing::Throw;
using namespace std::chrono_literals;
using Argv = std::vector<std::string>;

constexpr std::int64_t kStart = 1'700'000'000'000'000;

// Records every event; copies what the event only borrows.
class RecordingSink : public redlimit::MetricsSink {
 public:
  struct Seen {
    std::string resource;
    Operation operation;
    bool has_decision;
    Decision decision;
    std::string error;
    std::chrono::nanoseconds latency;
  };
  void on_event(const redlimit::MetricsEvent& e) noexcept override {
    std::lock_guard<std::mutex> lock(mutex);
    events.push_back(Seen{std::string(e.resource), e.operation, e.decision != nullptr,
                          e.decision ? *e.decision : Decision{}, std::string(e.error), e.latency});
  }
  std::mutex mutex;
  std::vector<Seen> events;
};

using redlimit_test::SteppedClock;

class ResilienceTest : public ::testing::Test {
 protected:
  std::shared_ptr<StrictMock<MockConnection>> mock = std::make_shared<StrictMock<MockConnection>>();
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>(Micros{kStart});

  Options options(OnFailure on_failure, int breaker_threshold = 0) const {
    Options o;
    o.clock = clock;
    o.on_failure = on_failure;
    o.breaker_threshold = breaker_threshold;
    return o;
  }
};

}  // namespace resilience_fixture

using namespace resilience_fixture;  // NOLINT: the test files use the fixture's names

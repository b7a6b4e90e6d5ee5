// redlimit/prometheus.hpp: the exposition is valid text format (checked line by line by
// tests/support/prometheus_text.hpp), its counts are the calls made, labels never carry a subject
// and the resources are capped; behind a MockConnection and a ManualClock.
#include <thread>

#include "redlimit/prometheus.hpp"
#include "support/prometheus_text.hpp"
#include "unit/resilience_fixture.hpp"

namespace {

using redlimit::PrometheusSink;
using redlimit_test::PrometheusText;

// A limiter over the mock whose metrics go to `prom`.
class PrometheusTest : public ResilienceTest {
 protected:
  RateLimiter observed(OnFailure on_failure, int breaker_threshold) const {
    Options o = options(on_failure, breaker_threshold);
    o.metrics = prom;
    return RateLimiter(mock, o);
  }
  std::shared_ptr<PrometheusSink> prom = std::make_shared<PrometheusSink>();
};

TEST_F(PrometheusTest, CountsDecisionsErrorsAndLatency) {
  const RateLimiter limiter = observed(OnFailure::raise, 0);
  const auto fw = limiter.fixed_window("api", Limit::per_second(5));
  {
    InSequence seq;
    EXPECT_CALL(*mock, command(_)).Times(3).WillRepeatedly(Return(decision_reply(1, 4, 0, 1'000'000)));
    EXPECT_CALL(*mock, command(_)).Times(2).WillRepeatedly(Return(decision_reply(0, 0, 500'000, 1'000'000)));
    EXPECT_CALL(*mock, command(_)).WillOnce(Throw(ConnectionError("refused")));
    EXPECT_CALL(*mock, command(_)).WillOnce(Throw(TimeoutError("slow")));
  }
  for (int i = 0; i < 5; ++i) fw.consume("secret-subject-" + std::to_string(i));
  EXPECT_THROW(fw.consume("u"), ConnectionError);
  EXPECT_THROW(fw.consume("u"), TimeoutError);

  const std::string text = prom->render(limiter.health());
  const PrometheusText parsed(text);
  EXPECT_EQ(parsed.type_of("redlimit_decisions_total"), "counter");
  EXPECT_EQ(parsed.type_of("redlimit_call_duration_seconds"), "histogram");
  const std::map<std::string, std::string> api{{"resource", "api"}, {"strategy", "fw"}, {"source", "primary"}};
  auto with = [&](std::map<std::string, std::string> m, const char* k, const char* v) {
    m[k] = v;
    return m;
  };
  EXPECT_EQ(parsed.sum("redlimit_decisions_total", with(api, "outcome", "allowed")), 3);
  EXPECT_EQ(parsed.sum("redlimit_decisions_total", with(api, "outcome", "rejected")), 2);
  EXPECT_EQ(parsed.sum("redlimit_errors_total", {{"kind", "connection"}}), 1);
  EXPECT_EQ(parsed.sum("redlimit_errors_total", {{"kind", "timeout"}}), 1);
  EXPECT_EQ(parsed.sum("redlimit_call_duration_seconds_count", {{"operation", "consume"}}), 7);
  EXPECT_EQ(parsed.sum("redlimit_call_duration_seconds_bucket", {{"operation", "consume"}, {"le", "+Inf"}}), 7);
  EXPECT_EQ(text.find("secret-subject"), std::string::npos) << "labels never carry a subject";
}

// Bad input throws before any I/O, and still shows: redlimit_errors_total{kind="invalid_argument"},
// one per refused call, by operation (before, no sample at all: every check threw before the sink
// heard of the call). counters().errors stays what failed against Redis.
TEST_F(PrometheusTest, CountsCallsRefusedForBadInputAsInvalidArgument) {
  const RateLimiter limiter = observed(OnFailure::raise, 0);
  const auto fw = limiter.fixed_window("api", Limit::per_second(10));
  EXPECT_CALL(*mock, command(_)).Times(0);
  EXPECT_THROW(fw.consume("u", 0), InvalidArgument);
  EXPECT_THROW(fw.consume(std::string(2000, 'x')), InvalidArgument);
  EXPECT_THROW(fw.consume_many({{"a", 1}, {"b", 11}}), InvalidArgument);
  EXPECT_THROW(fw.peek("", 1), InvalidArgument);
  EXPECT_THROW(fw.block("u", Micros(0)), InvalidArgument);
  EXPECT_THROW(fw.reset(""), InvalidArgument);
  const PrometheusText parsed(prom->render(limiter.health()));
  EXPECT_EQ(parsed.sum("redlimit_errors_total", {{"kind", "invalid_argument"}}), 6);
  EXPECT_EQ(parsed.sum("redlimit_errors_total", {{"kind", "invalid_argument"}, {"operation", "consume"}}), 3);
  EXPECT_EQ(parsed.sum("redlimit_errors_total", {{"kind", "invalid_argument"}, {"operation", "reset"}}), 1);
  EXPECT_EQ(limiter.counters().errors, 0u);
}

// A reset or unblock decides nothing: its event has no decision, and counts as an error only when
// it threw (before, every successful one was an error of kind "unknown").
TEST_F(PrometheusTest, CountsAResetOrUnblockThatWentThroughAsNoError) {
  const RateLimiter limiter = observed(OnFailure::raise, 0);
  const auto fw = limiter.fixed_window("api", Limit::per_second(5));
  {
    InSequence seq;
    EXPECT_CALL(*mock, command(_)).WillOnce(Return(redlimit::Reply::make_integer(1)));
    EXPECT_CALL(*mock, command(_)).WillOnce(Return(decision_reply(1, 0, 0, 0)));
    EXPECT_CALL(*mock, command(_)).WillOnce(Throw(ConnectionError("refused")));
  }
  fw.reset("u");
  fw.unblock("u");
  EXPECT_THROW(fw.reset("u"), ConnectionError);
  const PrometheusText parsed(prom->render());
  EXPECT_EQ(parsed.sum("redlimit_errors_total", {}), 1);
  EXPECT_EQ(parsed.sum("redlimit_errors_total", {{"operation", "reset"}, {"kind", "connection"}}), 1);
  EXPECT_EQ(parsed.sum("redlimit_call_duration_seconds_count", {{"operation", "reset"}}), 2);
  EXPECT_EQ(parsed.sum("redlimit_call_duration_seconds_count", {{"operation", "unblock"}}), 1);
}

// A resource is any bytes, a label value UTF-8 (audit_api.md, finding 1): "caf\xe9" (Latin-1) used to
// be written as it is, and Prometheus refuses the whole scrape for it. Each byte that begins no valid
// sequence is U+FFFD now; valid sequences, multibyte ones included, are kept; two resources that
// differ only in such bytes share one series. The strict parser checks that every value is UTF-8.
TEST_F(PrometheusTest, ResourcesThatAreNotUtf8GetReplacementCharacters) {
  const RateLimiter limiter = observed(OnFailure::raise, 0);
  EXPECT_CALL(*mock, command(_)).WillRepeatedly(Return(decision_reply(1, 4, 0, 1'000'000)));
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"caf\xe9", "caf\uFFFD"},                       // Latin-1
      {"caf\xea", "caf\uFFFD"},                       // the same label: one series
      {"euro\xe2\x82", "euro\uFFFD\uFFFD"},           // a multibyte sequence cut short
      {"over\xc0\xaflong", "over\uFFFD\uFFFDlong"},   // an overlong '/'
      {"sur\xed\xa0\x80", "sur\uFFFD\uFFFD\uFFFD"},    // a surrogate
      {"big\xf4\x90\x80\x80", "big\uFFFD\uFFFD\uFFFD\uFFFD"},  // past U+10FFFF
      {"caf\u00e9 \u20ac \U0001F600", "caf\u00e9 \u20ac \U0001F600"},  // valid: as written
  };
  for (const auto& [resource, label] : cases) limiter.fixed_window(resource, Limit::per_second(5)).consume("u");
  const std::string text = prom->render();
  const PrometheusText parsed(text);  // throws on a value that is not UTF-8
  for (const auto& [resource, label] : cases) {
    SCOPED_TRACE(label);
    EXPECT_EQ(parsed.sum("redlimit_decisions_total", {{"resource", label}}), label == "caf\uFFFD" ? 2 : 1);
  }
  EXPECT_EQ(text.find("caf\xe9"), std::string::npos);
}

// The strict parser itself refuses a label value that is not UTF-8, as Prometheus does.
TEST(PrometheusTextTest, RefusesLabelValuesThatAreNotUtf8) {
  const std::string head = "# TYPE m counter\nm{l=\"";
  for (const std::string bad : {"caf\xe9", "\xe2\x82", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\x80"}) {
    EXPECT_THROW(PrometheusText(head + bad + "\"} 1\n"), std::runtime_error);
  }
  EXPECT_NO_THROW(PrometheusText(head + "caf\u00e9 \U0001F600\"} 1\n"));
}

TEST_F(PrometheusTest, BreakerStateAndFailurePolicySource) {
  const RateLimiter limiter = observed(OnFailure::fail_open, 1);
  const auto fw = limiter.fixed_window("api", Limit::per_second(5));
  EXPECT_CALL(*mock, command(_)).WillOnce(Throw(ConnectionError("refused")));
  fw.consume("u");  // the breaker opens
  fw.consume("u");  // short-circuited
  const PrometheusText parsed(prom->render(limiter.health()));
  EXPECT_EQ(parsed.type_of("redlimit_breaker_state"), "gauge");
  EXPECT_EQ(parsed.sum("redlimit_script_path", {{"api", "sync"}, {"path", "evalsha"}}), 1);  // the mock's
  EXPECT_EQ(parsed.sum("redlimit_script_path", {{"api", "sync"}}), 1);
  EXPECT_EQ(parsed.sum("redlimit_breaker_state", {{"shard", "0"}}), 2);  // open
  EXPECT_EQ(parsed.sum("redlimit_decisions_total", {{"source", "failure_policy"}, {"outcome", "allowed"}}), 2);
  // Without a Health the family is absent, and the rest still parses.
  const PrometheusText bare(prom->render());
  EXPECT_EQ(bare.type_of("redlimit_breaker_state"), "");
}

TEST(PrometheusSinkTest, ResourcesPastTheCapAreOther) {
  PrometheusSink prom(2);
  const redlimit::Decision d{true};
  for (const char* r : {"a", "b", "c", "d", "a"}) {
    redlimit::MetricsEvent e;
    e.resource = r;
    e.strategy = "sw";
    e.decision = &d;
    prom.on_event(e);
  }
  const PrometheusText parsed(prom.render());
  EXPECT_EQ(parsed.sum("redlimit_decisions_total", {{"resource", "a"}}), 2);
  EXPECT_EQ(parsed.sum("redlimit_decisions_total", {{"resource", "b"}}), 1);
  EXPECT_EQ(parsed.sum("redlimit_decisions_total", {{"resource", "_other"}}), 2);
  EXPECT_EQ(parsed.sum("redlimit_decisions_total", {{"resource", "c"}}), 0);
  EXPECT_EQ(parsed.sum("redlimit_resources_overflow_total"), 2);
}

// Each latency falls in the first bucket whose bound is at least it; an odd resource is escaped.
TEST(PrometheusSinkTest, LatencyBucketsAndEscaping) {
  PrometheusSink prom;
  const redlimit::Decision d{true};
  for (auto latency : {std::chrono::microseconds(50), std::chrono::microseconds(51), std::chrono::microseconds(900),
                       std::chrono::microseconds(2'000'000)}) {
    redlimit::MetricsEvent e;
    e.resource = "we\"ird\\name\n";
    e.strategy = "fw";
    e.decision = &d;
    e.latency = latency;
    prom.on_event(e);
  }
  const std::string text = prom.render();
  const PrometheusText parsed(text);
  auto bucket = [&](const char* le) {
    return parsed.sum("redlimit_call_duration_seconds_bucket", {{"operation", "consume"}, {"le", le}});
  };
  EXPECT_EQ(bucket("5e-05"), 1);
  EXPECT_EQ(bucket("0.0001"), 2);
  EXPECT_EQ(bucket("0.001"), 3);
  EXPECT_EQ(bucket("1"), 3);
  EXPECT_EQ(bucket("+Inf"), 4);
  EXPECT_EQ(parsed.sum("redlimit_decisions_total", {{"resource", "we\"ird\\name\n"}}), 4);
  EXPECT_NE(text.find(R"(resource="we\"ird\\name\n")"), std::string::npos);
}

TEST(PrometheusSinkTest, ConcurrentEventsAreAllCounted) {
  PrometheusSink prom;
  const redlimit::Decision d{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) {
        redlimit::MetricsEvent e;
        e.resource = "api";
        e.strategy = "tb";
        e.decision = &d;
        prom.on_event(e);
        if (i % 100 == 0) (void)prom.render();
      }
    });
  }
  for (auto& t : threads) t.join();
  const PrometheusText parsed(prom.render());
  EXPECT_EQ(parsed.sum("redlimit_decisions_total", {{"outcome", "rejected"}}), 4000);
  EXPECT_EQ(parsed.sum("redlimit_call_duration_seconds_count"), 4000);
}

// The reader itself rejects what a scraper would: these tests can fail.
TEST(PrometheusTextTest, RejectsMalformedExpositions) {
  const char* bad[] = {
      "# TYPE x counter\n# TYPE x counter\nx 1\n",                      // TYPE twice
      "x 1\n",                                                          // no TYPE
      "# TYPE x counter\nx{a=\"1\"} 1\n# TYPE y gauge\ny 1\nx{a=\"2\"} 1\n",  // split family
      "# TYPE x counter\nx{a=1} 1\n",                                   // unquoted label
      "# TYPE x counter\nx{a=\"\\t\"} 1\n",                             // bad escape
      "# TYPE x counter\nx one\n",                                      // bad value
      "# TYPE 1x counter\n",                                            // bad name
      "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum 0\nh_count 1\n",  // not cumulative
      "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 0\nh_count 3\n",  // count != +Inf
      "# TYPE x counter\nx 1",                                          // no final newline
  };
  for (const char* text : bad) EXPECT_THROW(PrometheusText{text}, std::runtime_error) << text;
  EXPECT_NO_THROW(PrometheusText("# HELP x a\n# TYPE x counter\nx{a=\"q\\\"\"} 1\n"));
}

}  // namespace

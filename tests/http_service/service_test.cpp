// examples/http_service run as users run it, against a real redis-server of its own, and asked with
// a real HTTP client (cpp-httplib's): the headers of draft-11 on every answer, 429 with Retry-After
// after the limit, a retry after Retry-After admitted, and Redis killed -> the failure policy
// (fail_open: admitted, no quota claimed) and /healthz saying so (breaker, decision source); /login's
// block after repeated failures, the global limit, and /metrics read by a strict parser of the text
// format whose counts are the requests made; and the same service in memory.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "support/prometheus_text.hpp"
#include "support/redis_server.hpp"

namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    throw std::runtime_error("no free port");
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

// The service as a child process: stopped (SIGTERM, then reaped) by the destructor, and killed by
// the kernel if this test process dies first.
class Service {
 public:
  Service(const std::string& redis_url, int port, const std::vector<std::pair<std::string, std::string>>& env = {})
      : port_(port) {
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      ::setenv("REDIS_URL", redis_url.c_str(), 1);
      ::setenv("PORT", std::to_string(port).c_str(), 1);
      ::setenv("ON_FAILURE", "fail_open", 1);
      for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
      ::execl(REDLIMIT_HTTP_SERVICE, REDLIMIT_HTTP_SERVICE, static_cast<char*>(nullptr));
      ::_exit(127);
    }
  }
  ~Service() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  Service(const Service&) = delete;
  Service& operator=(const Service&) = delete;

  int port() const { return port_; }
  // Waits (at most ~10 s) until the service answers /healthz.
  bool ready() const {
    for (int i = 0; i < 200; ++i) {
      httplib::Client c("127.0.0.1", port_);
      if (auto r = c.Get("/healthz")) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }
  // An HTTP client of the service, with the tests' connect and read timeouts.
  httplib::Client client() const {
    httplib::Client http("127.0.0.1", port_);
    http.set_connection_timeout(2);
    http.set_read_timeout(5);
    return http;
  }

 private:
  int port_;
  pid_t pid_ = -1;
};

// Waits until the next whole second has just begun, so that a burst of requests falls in one second.
void start_of_a_second() {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const auto into = now - std::chrono::duration_cast<std::chrono::seconds>(now);
  std::this_thread::sleep_for(std::chrono::seconds(1) - into + std::chrono::milliseconds(5));
}

// Every attempt counts against 5/min; the third failure blocks the address for 5 minutes, so the
// next attempt, with the right password, gets 429 and a Retry-After of about 300 s.
void expect_login_block(httplib::Client& http) {
  const int expected[] = {200, 401, 401, 401};
  const char* forms[] = {"password=letmein", "password=letmein&fail=1", "password=wrong", "password=wrong"};
  for (int i = 0; i < 4; ++i) {
    auto r = http.Post("/login", forms[i], "application/x-www-form-urlencoded");
    ASSERT_TRUE(r) << i;
    EXPECT_EQ(r->status, expected[i]) << forms[i];
    EXPECT_EQ(r->get_header_value("RateLimit-Policy"), R"("5/1m";q=5;w=60)");
  }
  auto blocked = http.Post("/login", "password=letmein", "application/x-www-form-urlencoded");
  ASSERT_TRUE(blocked);
  EXPECT_EQ(blocked->status, 429);
  EXPECT_THAT(blocked->get_header_value("Retry-After"), MatchesRegex("29[0-9]|300"));
}

// /metrics parses line by line, and its counts are the requests this test made.
void expect_metrics(httplib::Client& http, int search_allowed, int search_rejected) {
  auto r = http.Get("/metrics");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_THAT(r->get_header_value("Content-Type"), HasSubstr("text/plain; version=0.0.4"));
  const redlimit_test::PrometheusText m(r->body);
  auto count = [&](const char* resource, const char* outcome) {
    return m.sum("redlimit_decisions_total",
                 {{"resource", resource}, {"operation", "consume"}, {"outcome", outcome}, {"source", "primary"}});
  };
  EXPECT_EQ(count("search", "allowed"), search_allowed);
  EXPECT_EQ(count("search", "rejected"), search_rejected);
  EXPECT_EQ(count("search-global", "allowed"), search_allowed);
  EXPECT_EQ(count("login", "allowed"), 4);
  EXPECT_EQ(count("login", "rejected"), 1);
  EXPECT_EQ(count("login-failures", "allowed"), 2);
  EXPECT_EQ(count("login-failures", "rejected"), 1);
  EXPECT_EQ(m.sum("redlimit_call_duration_seconds_count", {{"operation", "consume"}}),
            m.sum("redlimit_decisions_total", {{"operation", "consume"}}));
  EXPECT_EQ(m.sum("redlimit_breaker_state", {{"shard", "0"}}), 0);
  EXPECT_EQ(m.sum("redlimit_script_path", {{"api", "sync"}, {"path", "functions"}}), 1);  // Redis 7
  EXPECT_EQ(r->body.find("key:"), std::string::npos) << "no subject in a label";
}

TEST(HttpServiceTest, HeadersRejectionRetryAndRedisDown) {
  redlimit_test::RedisServer redis;
  Service service(redis.url(), free_port());
  ASSERT_TRUE(service.ready()) << "the service did not start";
  httplib::Client http = service.client();
  const httplib::Headers key{{"X-API-Key", "k1"}};

  auto health = http.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_THAT(health->body, HasSubstr(R"("redis":"up")"));

  start_of_a_second();
  for (int i = 1; i <= 10; ++i) {
    auto r = http.Get("/api/search", key);
    ASSERT_TRUE(r) << i;
    EXPECT_EQ(r->status, 200) << i;
    EXPECT_EQ(r->get_header_value("RateLimit-Policy"), R"("10/1s";q=10;w=1, "300/1m";q=300;w=60)");
    // The 1 s limit is full again within 2 s; the minute's reset depends on the second of the minute.
    EXPECT_THAT(r->get_header_value("RateLimit"),
                MatchesRegex("\"10/1s\";r=" + std::to_string(10 - i) +
                             ";t=[12], \"300/1m\";r=" + std::to_string(300 - i) + ";t=[0-9]+"));
    EXPECT_FALSE(r->has_header("Retry-After"));
  }
  auto rejected = http.Get("/api/search", key);
  ASSERT_TRUE(rejected);
  EXPECT_EQ(rejected->status, 429);
  const std::string retry = rejected->get_header_value("Retry-After");
  EXPECT_THAT(retry, MatchesRegex("[12]"));
  EXPECT_THAT(rejected->get_header_value("RateLimit"), MatchesRegex("\"10/1s\";r=0;t=[12], \"300/1m\";r=290;t=[0-9]+"));
  EXPECT_EQ(rejected->body, R"({"error":"too many requests","retry_after":)" + retry + "}\n");
  // Another key has its own quota.
  auto other = http.Get("/api/search", httplib::Headers{{"X-API-Key", "k2"}});
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 200);

  std::this_thread::sleep_for(std::chrono::seconds(std::stoi(retry)));
  auto again = http.Get("/api/search", key);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 200) << "a retry after Retry-After is admitted";

  expect_login_block(http);
  expect_metrics(http, 12, 1);

  // An API key longer than redlimit accepts is the client's mistake: 400, and no internals.
  auto bad = http.Get("/api/search", httplib::Headers{{"X-API-Key", std::string(2000, 'x')}});
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(bad->body, "{\"error\":\"bad request\"}\n");

  redis.stop();  // fail_open: admitted, no quota claimed, and /healthz says Redis is down
  auto open = http.Get("/api/search", key);
  ASSERT_TRUE(open);
  EXPECT_EQ(open->status, 200);
  EXPECT_FALSE(open->has_header("RateLimit"));
  EXPECT_EQ(open->get_header_value("X-RateLimit-Source"), "failure_policy");
  EXPECT_EQ(open->get_header_value("RateLimit-Policy"), R"("10/1s";q=10;w=1, "300/1m";q=300;w=60)");
  health = http.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 503);
  EXPECT_THAT(health->body, HasSubstr(R"("redis":"down")"));
  EXPECT_THAT(health->body, ::testing::Not(HasSubstr("127.0.0.1")));

  // Five failures in a row open the breaker (Options::breaker_threshold): /healthz and /metrics say so.
  for (int i = 0; i < 5; ++i) {
    auto r = http.Get("/api/search", key);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
  }
  health = http.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_THAT(health->body, MatchesRegex(R"re(.*"breaker":"(open|half_open)","last_source":"failure_policy",)re"
                                         R"re("on_failure":"fail_open".*)re"));
  auto metrics = http.Get("/metrics");
  ASSERT_TRUE(metrics);
  const redlimit_test::PrometheusText parsed(metrics->body);
  EXPECT_GE(parsed.sum("redlimit_breaker_state", {{"shard", "0"}}), 1);
  EXPECT_EQ(parsed.sum("redlimit_decisions_total", {{"resource", "search"}, {"source", "failure_policy"}}), 6);
}

// ON_FAILURE=fail_closed: with Redis down, 503 and a body that says the limiter is unavailable,
// not that the client sent too many requests; no quota claimed.
TEST(HttpServiceTest, FailClosedIsA503ThatBlamesNoClient) {
  redlimit_test::RedisServer redis;
  Service service(redis.url(), free_port(), {{"ON_FAILURE", "fail_closed"}});
  ASSERT_TRUE(service.ready()) << "the service did not start";
  httplib::Client http = service.client();
  auto up = http.Get("/api/search");
  ASSERT_TRUE(up);
  EXPECT_EQ(up->status, 200);
  redis.stop();
  auto down = http.Get("/api/search");
  ASSERT_TRUE(down);
  EXPECT_EQ(down->status, 503);
  EXPECT_THAT(down->body, HasSubstr(R"("error":"rate limiter unavailable")"));
  EXPECT_FALSE(down->has_header("RateLimit"));
  EXPECT_EQ(down->get_header_value("X-RateLimit-Source"), "failure_policy");
}

// REDIS_URL=memory: the same service on the in-memory backend, the same fields and statuses.
TEST(HttpServiceTest, InMemoryBackend) {
  Service service("memory", free_port());
  ASSERT_TRUE(service.ready()) << "the service did not start";
  httplib::Client http = service.client();
  auto health = http.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  start_of_a_second();
  const httplib::Headers key{{"X-API-Key", "m"}};
  for (int i = 1; i <= 10; ++i) {
    auto r = http.Get("/api/search", key);
    ASSERT_TRUE(r) << i;
    EXPECT_EQ(r->status, 200) << i;
    EXPECT_EQ(r->get_header_value("X-RateLimit-Source"), "primary");
  }
  auto rejected = http.Get("/api/search", key);
  ASSERT_TRUE(rejected);
  EXPECT_EQ(rejected->status, 429);
  EXPECT_THAT(rejected->get_header_value("RateLimit"), MatchesRegex("\"10/1s\";r=0;t=[12], \"300/1m\";r=290;t=[0-9]+"));
  EXPECT_THAT(rejected->get_header_value("Retry-After"), MatchesRegex("[12]"));
}

// All callers of /api/search together: GLOBAL_LIMIT=4/min admits four requests from two keys, then
// rejects a third key with the global quota's own headers.
TEST(HttpServiceTest, GlobalLimitOverAllCallers) {
  Service service("memory", free_port(), {{"GLOBAL_LIMIT", "4/min"}});
  ASSERT_TRUE(service.ready()) << "the service did not start";
  httplib::Client http = service.client();
  for (const char* k : {"a", "a", "b", "b"}) {
    auto r = http.Get("/api/search", httplib::Headers{{"X-API-Key", k}});
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << k;
  }
  auto r = http.Get("/api/search", httplib::Headers{{"X-API-Key", "c"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 429);
  EXPECT_EQ(r->get_header_value("RateLimit-Policy"), R"("4/1m";q=4;w=60)");
  EXPECT_THAT(r->get_header_value("RateLimit"), MatchesRegex(R"("4/1m";r=0;t=[0-9]+)"));
  EXPECT_TRUE(r->has_header("Retry-After"));
}

// /login's own limit: 5 attempts a minute per address, even with the right password.
TEST(HttpServiceTest, LoginFivePerMinute) {
  Service service("memory", free_port());
  ASSERT_TRUE(service.ready()) << "the service did not start";
  httplib::Client http = service.client();
  for (int i = 1; i <= 5; ++i) {
    auto r = http.Post("/login", "password=letmein", "application/x-www-form-urlencoded");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << i;
    EXPECT_THAT(r->get_header_value("RateLimit"), MatchesRegex("\"5/1m\";r=" + std::to_string(5 - i) + ";t=[0-9]+"));
  }
  auto r = http.Post("/login", "password=letmein", "application/x-www-form-urlencoded");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 429);
  EXPECT_THAT(r->get_header_value("Retry-After"), MatchesRegex("[1-9]|[1-5][0-9]|60"));
}

}  // namespace

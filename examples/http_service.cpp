// A small HTTP service on cpp-httplib with redlimit in front of it: what a user of the library
// writes, with redlimit/http.hpp doing the headers, statuses and error bodies and
// redlimit/prometheus.hpp the metrics.
//
//   GET  /api/search  10/s and 300/min per API key (X-API-Key), else per client address; and a
//                     global limit over all callers together (GLOBAL_LIMIT, default 1000/s).
//                     200 with RateLimit-Policy and RateLimit; 429 with Retry-After and a JSON body.
//   POST /login       5/min per client address. A failed login (a password other than "letmein",
//                     or fail=1) counts; the 3rd failure in 10 min blocks the address for 5 min.
//                     200 ok, 401 wrong password, 429 limited or blocked.
//   GET  /metrics     Prometheus text exposition (docs/operations.md lists the metrics).
//   GET  /healthz     200 {"redis":"up",...} while Redis answers, 503 {"redis":"down",...} otherwise,
//                     with the breaker's state, the latest decision's source and the failure policy.
//
// Environment: REDIS_URL (default redis://127.0.0.1:6379/0; "memory" for the in-memory backend),
// PORT (default 8080), BIND (default 127.0.0.1), ON_FAILURE (raise, fail_open, fail_closed or
// fallback; default fail_open: the API stays up while Redis restarts), GLOBAL_LIMIT (a rate string),
// LIMITER=off (no limiter on /api/search: the baseline of scripts/bench.sh).
#include <csignal>
#include <memory>
#include <utility>

#include <redlimit/prometheus.hpp>

#include "http_service_support.hpp"

namespace {

using namespace std::chrono_literals;
using service::Guard;

struct Limits {
  redlimit::RateLimiter limiter;
  Guard search;       // per caller
  Guard global;       // all callers of /api/search together
  Guard login;        // attempts per address
  Guard login_fails;  // failures per address: past 2 in 10 minutes, the address is blocked
  redlimit::FixedWindow probe;
};

Guard guard(redlimit::Strategy s, std::vector<redlimit::Limit> limits) {
  return Guard{std::move(s), redlimit::http::quotas(limits)};
}

Limits make_limits(const std::shared_ptr<redlimit::PrometheusSink>& prom) {
  redlimit::Options options;
  options.prefix = "redlimit-service:";
  options.on_failure = service::on_failure(service::env("ON_FAILURE", "fail_open"));
  options.command_timeout = 200ms;  // a request waits no longer for Redis
  options.metrics = prom;
  const std::string url = service::env("REDIS_URL", "redis://127.0.0.1:6379/0");
  auto limiter = url == "memory" ? redlimit::RateLimiter::in_memory(options) : redlimit::RateLimiter::connect(url, options);
  const auto per_key = redlimit::parse_limits("10/s; 300/min");
  const auto global = redlimit::Limit::parse(service::env("GLOBAL_LIMIT", "1000/s"));
  const auto login = redlimit::Limit::per_minute(5);
  const auto fails = redlimit::Limit::parse("2/10m");
  return Limits{limiter,
                guard(limiter.policy("search", per_key), per_key),
                guard(limiter.sliding_window("search-global", global), {global}),
                guard(limiter.sliding_log("login", login), {login}),
                guard(limiter.sliding_log("login-failures", fails), {fails}),
                limiter.fixed_window("healthz", redlimit::Limit::per_second(1000000))};
}

// The caller's own limit first, so that a bad API key (400) or a caller over its quota costs the
// other callers nothing; then the global one, which gives the caller's unit back when it rejects.
void search(const Limits& l, const httplib::Request& req, httplib::Response& res) {
  try {
    const std::string subject = service::subject_of(req);
    if (!service::answer(l.search, l.search.strategy.consume(subject), res)) return;
    const redlimit::Decision g = l.global.strategy.consume("all");
    if (!g.allowed) {
      l.search.strategy.refund(subject);
      res.headers.clear();
      service::answer(l.global, g, res);
      return;
    }
    service::json(res, 200, R"({"results":[]})");
  } catch (const redlimit::Error& e) {
    service::fail(e, res);
  }
}

bool password_ok(const httplib::Request& req) {
  return req.get_param_value("fail") != "1" && req.get_param_value("password") == "letmein";
}

// Every attempt counts against 5/min; a failure also counts against 2 per 10 min, and the one
// that exceeds it blocks the address on the attempts limit for 5 minutes.
void login(const Limits& l, const httplib::Request& req, httplib::Response& res) {
  try {
    const std::string subject = "addr:" + req.remote_addr;
    if (!service::answer(l.login, l.login.strategy.consume(subject), res)) return;
    if (password_ok(req)) return service::json(res, 200, R"({"login":"ok"})");
    if (!l.login_fails.strategy.consume(subject).allowed) {
      l.login.strategy.block(subject, 5min);
      std::fprintf(stderr, "http_service: %s blocked for 5 minutes after repeated failed logins\n", subject.c_str());
    }
    service::json(res, 401, R"({"error":"wrong password"})");
  } catch (const redlimit::Error& e) {
    service::fail(e, res);
  }
}

// Health as the limiter sees it (read before the probe, whose own decision would hide the latest
// request's source), then whether Redis answers now (a peek records nothing).
void healthz(const Limits& l, httplib::Response& res) {
  const redlimit::Health h = l.limiter.health();
  bool up = false;
  try {
    up = l.probe.peek("probe").source == redlimit::Source::primary;
  } catch (const redlimit::Error&) {
    up = false;
  }
  const redlimit::Counters c = l.limiter.counters();
  std::string body = std::string("{\"redis\":\"") + (up ? "up" : "down") + "\",\"breaker\":\"" +
                     redlimit::to_string(h.breaker) + "\",\"last_source\":\"" +
                     (h.decided ? redlimit::to_string(h.last_source) : "none") + "\",\"on_failure\":\"" +
                     service::env("ON_FAILURE", "fail_open") + "\",\"errors\":" + std::to_string(c.errors) +
                     ",\"breaker_short_circuits\":" + std::to_string(c.breaker_short_circuits) +
                     ",\"from_failure_policy\":" + std::to_string(c.from_failure_policy) + "}";
  service::json(res, up ? 200 : 503, body);
}

int serve() {
  auto prom = std::make_shared<redlimit::PrometheusSink>();
  const Limits limits = make_limits(prom);
  const bool limiter_on = service::env("LIMITER", "on") != "off";
  httplib::Server server;
  // Without it a keep-alive response waits on the client's delayed ACK: ~40 ms a request.
  server.set_tcp_nodelay(true);
  server.Get("/api/search", [&](const httplib::Request& req, httplib::Response& res) {
    if (limiter_on) return search(limits, req, res);
    service::json(res, 200, R"({"results":[]})");
  });
  server.Post("/login", [&](const httplib::Request& req, httplib::Response& res) { login(limits, req, res); });
  server.Get("/healthz", [&](const httplib::Request&, httplib::Response& res) { healthz(limits, res); });
  server.Get("/metrics", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(prom->render(limits.limiter.health()), redlimit::PrometheusSink::kContentType);
  });
  const std::string bind = service::env("BIND", "127.0.0.1");
  const int port = std::atoi(service::env("PORT", "8080").c_str());
  std::printf("http_service: listening on %s:%d\n", bind.c_str(), port);
  std::fflush(stdout);
  if (!server.listen(bind, port)) {
    std::fprintf(stderr, "http_service: cannot listen on %s:%d\n", bind.c_str(), port);
    return 1;
  }
  return 0;
}

}  // namespace

int main() {
  std::signal(SIGPIPE, SIG_IGN);  // hiredis writes with write(2): see docs/api.md, "Errors"
  try {
    return serve();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "http_service: %s\n", e.what());
    return 1;
  }
}

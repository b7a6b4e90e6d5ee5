// A small HTTP service on cpp-httplib with redlimit in front of its API: what a user of the library
// writes, with redlimit/http.hpp doing the headers, statuses and error bodies.
//
//   GET /api/search   10/s and 300/min per API key (X-API-Key), else per client address. 200 with
//                     RateLimit-Policy and RateLimit; 429 with Retry-After and a small JSON body.
//   GET /healthz      200 {"redis":"up",...} while Redis answers, 503 {"redis":"down",...} otherwise,
//                     with the breaker's and the failure policy's counts.
//
// Environment: REDIS_URL (default redis://127.0.0.1:6379/0; "memory" for the in-memory backend),
// PORT (default 8080), BIND (default 127.0.0.1), ON_FAILURE (raise, fail_open, fail_closed or
// fallback; default fail_open: the API stays up while Redis restarts).
#include <httplib.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <redlimit/redlimit.hpp>
#include <string>
#include <vector>

namespace {

std::string env(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

redlimit::OnFailure on_failure(const std::string& name) {
  if (name == "raise") return redlimit::OnFailure::raise;
  if (name == "fail_closed") return redlimit::OnFailure::fail_closed;
  if (name == "fallback") return redlimit::OnFailure::fallback;
  if (name == "fail_open") return redlimit::OnFailure::fail_open;
  throw redlimit::InvalidArgument("ON_FAILURE must be raise, fail_open, fail_closed or fallback, got \"" + name + "\"");
}

redlimit::RateLimiter make_limiter() {
  redlimit::Options options;
  options.prefix = "redlimit-service:";
  options.on_failure = on_failure(env("ON_FAILURE", "fail_open"));
  options.command_timeout = std::chrono::milliseconds(200);  // a request waits no longer for Redis
  const std::string url = env("REDIS_URL", "redis://127.0.0.1:6379/0");
  if (url == "memory") return redlimit::RateLimiter::in_memory(options);
  return redlimit::RateLimiter::connect(url, options);
}

const char* source_name(redlimit::Source s) {
  switch (s) {
    case redlimit::Source::primary:
      return "primary";
    case redlimit::Source::fallback:
      return "fallback";
    case redlimit::Source::failure_policy:
      return "failure_policy";
    case redlimit::Source::local_cache:
      return "local_cache";
    case redlimit::Source::lease:
      return "lease";
  }
  return "unknown";
}

// The subject: the API key when the client sends one, else its address. A key longer than redlimit
// accepts (1 KiB) is the client's mistake: consume() throws InvalidArgument, answered with 400.
std::string subject_of(const httplib::Request& req) {
  const std::string key = req.get_header_value("X-API-Key");
  return key.empty() ? "addr:" + req.remote_addr : "key:" + key;
}

// Decides, sets the headers and, when rejected, the status and body. Returns whether to serve.
bool admit(const redlimit::Strategy& limit, const std::vector<redlimit::http::Quota>& quotas,
           const httplib::Request& req, httplib::Response& res) {
  try {
    const redlimit::Decision d = limit.consume(subject_of(req));
    for (const auto& f : redlimit::http::headers(d, quotas)) res.set_header(f.name, f.value);
    res.set_header("X-RateLimit-Source", source_name(d.source));
    if (d.allowed) return true;
    res.status = redlimit::http::status(d);
    const auto wait = std::chrono::ceil<std::chrono::seconds>(d.retry_after).count();
    res.set_content("{\"error\":\"too many requests\",\"retry_after\":" + std::to_string(wait) + "}\n",
                    "application/json");
  } catch (const redlimit::Error& e) {
    std::fprintf(stderr, "http_service: %s\n", e.what());  // the log may name Redis; the client may not
    const auto err = redlimit::http::error_response(e);
    res.status = err.status;
    res.set_content(err.body + "\n", "application/json");
  }
  return false;
}

}  // namespace

int main() {
  std::signal(SIGPIPE, SIG_IGN);  // hiredis writes with write(2): see docs/api.md, "Errors"
  try {
    const redlimit::RateLimiter limiter = make_limiter();
    const auto search = limiter.policy("search", redlimit::parse_limits("10/s; 300/min"));
    const auto search_quotas = redlimit::http::quotas(search.limits());
    const auto probe = limiter.fixed_window("healthz", redlimit::Limit::per_second(1000000));

    httplib::Server server;
    server.Get("/api/search", [&](const httplib::Request& req, httplib::Response& res) {
      if (admit(search, search_quotas, req, res)) res.set_content("{\"results\":[]}\n", "application/json");
    });
    server.Get("/healthz", [&](const httplib::Request&, httplib::Response& res) {
      bool up = false;
      try {
        up = probe.peek("probe").source == redlimit::Source::primary;  // records nothing
      } catch (const redlimit::Error&) {
        up = false;
      }
      const redlimit::Counters c = limiter.counters();
      res.status = up ? 200 : 503;
      res.set_content(std::string("{\"redis\":\"") + (up ? "up" : "down") +
                          "\",\"errors\":" + std::to_string(c.errors) +
                          ",\"breaker_short_circuits\":" + std::to_string(c.breaker_short_circuits) +
                          ",\"from_failure_policy\":" + std::to_string(c.from_failure_policy) + "}\n",
                      "application/json");
    });
    const std::string bind = env("BIND", "127.0.0.1");
    const int port = std::atoi(env("PORT", "8080").c_str());
    std::printf("http_service: listening on %s:%d\n", bind.c_str(), port);
    std::fflush(stdout);
    if (!server.listen(bind, port)) {
      std::fprintf(stderr, "http_service: cannot listen on %s:%d\n", bind.c_str(), port);
      return 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "http_service: %s\n", e.what());
    return 1;
  }
  return 0;
}

#pragma once
// What examples/http_service.cpp's routes share: configuration from the environment, the subject of
// a request, and one limit check turned into headers and, when rejected, a 429 (redlimit/http.hpp
// does the header fields, the statuses and the error bodies).
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <redlimit/redlimit.hpp>
#include <string>
#include <vector>

namespace service {

inline std::string env(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

inline redlimit::OnFailure on_failure(const std::string& name) {
  if (name == "raise") return redlimit::OnFailure::raise;
  if (name == "fail_closed") return redlimit::OnFailure::fail_closed;
  if (name == "fallback") return redlimit::OnFailure::fallback;
  if (name == "fail_open") return redlimit::OnFailure::fail_open;
  throw redlimit::InvalidArgument("ON_FAILURE must be raise, fail_open, fail_closed or fallback, got \"" + name + "\"");
}

// A strategy and the quotas its headers announce.
struct Guard {
  redlimit::Strategy strategy;
  std::vector<redlimit::http::Quota> quotas;
};

inline void json(httplib::Response& res, int status, const std::string& body) {
  res.status = status;
  res.set_content(body + "\n", "application/json");
}

// The subject: the API key when the client sends one, else its address. A key longer than redlimit
// accepts (1 KiB) is the client's mistake: consume() throws InvalidArgument, answered with 400.
inline std::string subject_of(const httplib::Request& req) {
  const std::string key = req.get_header_value("X-API-Key");
  return key.empty() ? "addr:" + req.remote_addr : "key:" + key;
}

// Sets `d`'s header fields and, when it rejects, the status and a small JSON body. Returns d.allowed.
inline bool answer(const Guard& guard, const redlimit::Decision& d, httplib::Response& res) {
  for (const auto& f : redlimit::http::headers(d, guard.quotas)) res.set_header(f.name, f.value);
  res.set_header("X-RateLimit-Source", redlimit::to_string(d.source));
  if (d.allowed) return true;
  const auto wait = std::chrono::ceil<std::chrono::seconds>(d.retry_after).count();
  const int status = redlimit::http::status(d);  // 503: fail_closed answered for an outage, not a quota
  const char* what = status == 503 ? "rate limiter unavailable" : "too many requests";
  json(res, status,
       "{\"error\":\"" + std::string(what) + "\",\"retry_after\":" + std::to_string(std::max<long long>(1, wait)) +
           "}");
  return false;
}

// An exception from a decision call: 400 for the client's mistakes, 503 for an outage (under
// OnFailure::raise), never the exception's text, which may name the Redis server.
inline void fail(const std::exception& e, httplib::Response& res) {
  std::fprintf(stderr, "http_service: %s\n", e.what());  // the log may name Redis; the client may not
  const auto err = redlimit::http::error_response(e);
  json(res, err.status, err.body);
}

}  // namespace service

#pragma once
// HTTP from a Decision: the header fields of draft-ietf-httpapi-ratelimit-headers-11
// (RateLimit-Policy and RateLimit, in Structured Fields syntax), Retry-After, optionally the legacy
// X-RateLimit-Limit/-Remaining/-Reset, and the status codes of decisions and of redlimit's
// exceptions. Header-only and tied to no HTTP library: copy the fields into your server's response.
//
//   const auto api = limiter.policy("api", redlimit::parse_limits("10/s; 300/min"));
//   const auto quotas = redlimit::http::quotas(api.limits());        // once: "10/1s", "300/1m"
//   try {
//     const redlimit::Decision d = api.consume(key);
//     for (const auto& f : redlimit::http::headers(d, quotas)) response.set_header(f.name, f.value);
//     if (!d.allowed) return reply(redlimit::http::status(d));        // 429 (503: fail_closed)
//   } catch (const redlimit::Error& e) {
//     const auto err = redlimit::http::error_response(e);              // 400, 503 or 500; no e.what()
//     return reply(err.status, err.body);
//   }
//
// Every item says only what the decision knows: a policy's decision carries each limit's own
// remaining and reset (Decision::limits); a decision made without a store (fail_open, fail_closed,
// the local reject cache), or a policy's block() whose peek under the block went unanswered
// (Strategy::block), has no per-limit quota, and gets no
// RateLimit items and no X-RateLimit-* fields (Retry-After still tells when to come back).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "redlimit/decision.hpp"
#include "redlimit/detail/structured_fields.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/limit.hpp"

namespace redlimit::http {

// One header field. Names are the canonical spellings; HTTP field names are case-insensitive.
struct Field {
  std::string name;
  std::string value;
  friend bool operator==(const Field& a, const Field& b) { return a.name == b.name && a.value == b.value; }
};

// One limit as the headers name and describe it: an item of RateLimit-Policy and of RateLimit.
struct Quota {
  // The item: any printable ASCII (sent as an sf-string, quoted, '\' and '"' escaped); not empty.
  std::string name;
  // Units per window, or a bucket's capacity. "q".
  std::int64_t limit = 0;
  // "w", in seconds rounded up; 0 leaves "w" out (a token bucket's capacity has no window).
  std::chrono::microseconds window{0};
};

// A Limit as a Quota named by its canonical text: Limit::per_second(10) is "10/1s".
inline Quota quota(const Limit& limit) { return Quota{limit.to_string(), limit.count(), limit.window()}; }

// A policy's limits (Policy::limits()), in order: the quotas its decisions are stated against.
inline std::vector<Quota> quotas(const std::vector<Limit>& limits) {
  std::vector<Quota> out;
  out.reserve(limits.size());
  for (const Limit& l : limits) out.push_back(quota(l));
  return out;
}

struct HeaderOptions {
  // "qu" on each RateLimit-Policy item: "requests" (the draft's default when absent),
  // "content-bytes" or "concurrent-requests". Empty: no "qu".
  std::string unit;
  // "pk" on every item: the partition the quota belongs to, any bytes (sent base64, as an sf-binary).
  // Empty: no "pk". Never put a secret here (an API key): the client sees it.
  std::string partition_key;
  // RateLimit-Policy: what the limits are. The same on every response, so a server may send it once.
  bool policy_field = true;
  // X-RateLimit-Limit, -Remaining and -Reset (delta seconds) of the deciding limit, for the clients
  // that read only those.
  bool legacy = false;
};

namespace http_impl {

// What a decision says of one limit, in header units.
struct Item {
  std::int64_t remaining = 0;
  std::int64_t reset_seconds = 0;
};

// Every field of a hand-made Decision is checked before anything is written.
inline void check(const Decision& d) {
  detail::sf::integer(d.limit, "Decision::limit");
  detail::sf::integer(d.remaining, "Decision::remaining");
  detail::sf::seconds_up(d.retry_after, "Decision::retry_after");
  detail::sf::seconds_up(d.reset_after, "Decision::reset_after");
  detail::sf::seconds_up(d.delay, "Decision::delay");
  if (!d.limits.empty() && d.limit_index >= d.limits.size()) {
    throw InvalidArgument("Decision::limit_index " + std::to_string(d.limit_index) + " is not below its " +
                          std::to_string(d.limits.size()) + " limits");
  }
  for (const LimitState& s : d.limits) {
    detail::sf::integer(s.limit, "LimitState::limit");
    detail::sf::integer(s.remaining, "LimitState::remaining");
    detail::sf::seconds_up(s.window, "LimitState::window");
    detail::sf::seconds_up(s.reset_after, "LimitState::reset_after");
  }
}

inline void check(const std::vector<Quota>& quotas, const HeaderOptions& options) {
  if (quotas.empty()) throw InvalidArgument("headers need at least one quota");
  for (const Quota& q : quotas) {
    if (q.name.empty()) throw InvalidArgument("a quota name must not be empty");
    detail::sf::string(q.name, "quota name");
    detail::sf::integer(q.limit, "quota limit");
    detail::sf::integer(detail::sf::seconds_up(q.window, "quota window"), "quota window");
  }
  if (!options.unit.empty()) detail::sf::string(options.unit, "quota unit");
}

inline void expect_limit(std::int64_t got, const Quota& q) {
  if (got != q.limit) {
    throw InvalidArgument("the decision's limit " + std::to_string(got) + " is not quota \"" + q.name + "\"'s " +
                          std::to_string(q.limit) + ": headers must be built with the strategy's own quotas");
  }
}

// Each quota's remaining and reset, as the decision knows them; empty when it knows none.
inline std::vector<Item> items(const Decision& d, const std::vector<Quota>& quotas) {
  std::vector<Item> out;
  if (d.source != Source::primary && d.source != Source::fallback) return out;  // no store decided
  if (!d.limits.empty()) {
    if (d.limits.size() != quotas.size()) {
      throw InvalidArgument("the decision has " + std::to_string(d.limits.size()) + " limits, the headers " +
                            std::to_string(quotas.size()) + " quotas");
    }
    for (std::size_t i = 0; i < quotas.size(); ++i) {
      expect_limit(d.limits[i].limit, quotas[i]);
      out.push_back({d.limits[i].remaining, detail::sf::seconds_up(d.limits[i].reset_after, "reset")});
    }
    return out;
  }
  if (quotas.size() != 1) return out;  // a policy's block() without its peek: no limit's own quota was read
  expect_limit(d.limit, quotas[0]);
  out.push_back({d.remaining, detail::sf::seconds_up(d.reset_after, "reset")});
  return out;
}

// The parameters every item may end with.
inline std::string pk(const HeaderOptions& options) {
  return options.partition_key.empty() ? std::string() : ";pk=" + detail::sf::binary(options.partition_key);
}

inline std::string policy_value(const std::vector<Quota>& quotas, const HeaderOptions& options) {
  std::string v;
  for (const Quota& q : quotas) {
    if (!v.empty()) v += ", ";
    v += detail::sf::string(q.name, "quota name") + ";q=" + detail::sf::integer(q.limit, "quota limit");
    if (!options.unit.empty()) v += ";qu=" + detail::sf::string(options.unit, "quota unit");
    if (q.window.count() > 0) v += ";w=" + std::to_string(detail::sf::seconds_up(q.window, "quota window"));
    v += pk(options);
  }
  return v;
}

inline std::string limit_value(const std::vector<Quota>& quotas, const std::vector<Item>& items,
                               const HeaderOptions& options) {
  std::string v;
  for (std::size_t i = 0; i < quotas.size(); ++i) {
    if (!v.empty()) v += ", ";
    v += detail::sf::string(quotas[i].name, "quota name") + ";r=" + detail::sf::integer(items[i].remaining, "r") +
         ";t=" + detail::sf::integer(items[i].reset_seconds, "t") + pk(options);
  }
  return v;
}

}  // namespace http_impl

// The header fields for `d`, a decision of the strategy that `quotas` describe: one Quota for a
// single-limit strategy, one per limit (Policy::limits() order, see quotas()) for a policy.
//   RateLimit-Policy  every quota: "10/1s";q=10;w=1, "300/1m";q=300;w=60
//   RateLimit         every quota's remaining and reset (seconds, rounded up): "10/1s";r=9;t=1, ...
//   Retry-After       rejections only: retry_after in seconds, rounded up, at least 1. An exhausted
//                     limit's "t" is at most this, so the two never disagree on when to come back.
// A shadow-mode rejection was admitted: its quota fields are true (r=0), with no Retry-After.
// Throws InvalidArgument, before writing anything, for negative or out-of-range values, an empty or
// non-printable name or unit, or quotas that are not the decision's (count or limits differ).
inline std::vector<Field> headers(const Decision& d, const std::vector<Quota>& quotas,
                                  const HeaderOptions& options = {}) {
  http_impl::check(d);
  http_impl::check(quotas, options);
  std::vector<http_impl::Item> items = http_impl::items(d, quotas);
  std::int64_t retry = 0;
  if (!d.allowed) {
    retry = std::max<std::int64_t>(1, detail::sf::seconds_up(d.retry_after, "retry_after"));
    for (auto& item : items) {
      if (item.remaining == 0) item.reset_seconds = std::min(item.reset_seconds, retry);
    }
  }
  std::vector<Field> out;
  if (options.policy_field) out.push_back({"RateLimit-Policy", http_impl::policy_value(quotas, options)});
  if (!items.empty()) out.push_back({"RateLimit", http_impl::limit_value(quotas, items, options)});
  if (!d.allowed) out.push_back({"Retry-After", std::to_string(retry)});
  if (options.legacy && !items.empty()) {
    const std::size_t i = d.limits.empty() ? 0 : d.limit_index;
    out.push_back({"X-RateLimit-Limit", std::to_string(quotas[i].limit)});
    out.push_back({"X-RateLimit-Remaining", std::to_string(items[i].remaining)});
    out.push_back({"X-RateLimit-Reset", std::to_string(items[i].reset_seconds)});
  }
  return out;
}

// A single-limit strategy: `quota` describes its one limit (quota(Limit), or made by hand for a bucket).
inline std::vector<Field> headers(const Decision& d, const Quota& quota, const HeaderOptions& options = {}) {
  return headers(d, std::vector<Quota>{quota}, options);
}

// The status of a decision: 200 when admitted (shadow rejections included); 503 when fail_closed
// rejected because the store failed (the client did not exceed anything); 429 otherwise.
inline int status(const Decision& d) {
  if (d.allowed) return 200;
  return d.source == Source::failure_policy ? 503 : 429;
}

// The status of an exception thrown by a decision call: 400 for InvalidArgument (a subject too long,
// a bad cost: the request's fault when it came from the client), 503 for an outage (ConnectionError,
// TimeoutError, UnavailableError), 500 for anything else, AuthError included (a configuration error
// that no retry fixes).
inline int status(const std::exception& e) {
  if (dynamic_cast<const InvalidArgument*>(&e) != nullptr) return 400;
  if (dynamic_cast<const AuthError*>(&e) != nullptr) return 500;
  if (dynamic_cast<const ConnectionError*>(&e) != nullptr) return 503;
  if (dynamic_cast<const UnavailableError*>(&e) != nullptr) return 503;
  return 500;
}

// A response for an exception: its status and a fixed JSON body. Never the exception's text, which
// may name the Redis server's address or echo the client's input.
struct ErrorResponse {
  int status = 500;
  std::string body;
};

inline ErrorResponse error_response(const std::exception& e) {
  const int s = status(e);
  if (s == 400) return {s, R"({"error":"bad request"})"};
  if (s == 503) return {s, R"({"error":"rate limiter unavailable"})"};
  return {s, R"({"error":"internal error"})"};
}

}  // namespace redlimit::http

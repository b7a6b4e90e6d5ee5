#pragma once
// A MetricsSink that keeps Prometheus counters and a latency histogram, and renders them in the text
// exposition format (version 0.0.4) for a /metrics endpoint. Header-only; no Prometheus library.
//
//   auto prom = std::make_shared<redlimit::PrometheusSink>();
//   options.metrics = prom;
//   auto limiter = redlimit::RateLimiter::connect(url, options);
//   ...  GET /metrics:  body = prom->render(limiter.health());  // Content-Type: kContentType
//
// Label cardinality is bounded: labels never carry a subject, only the resource (the name the code
// gave a strategy), its kind, the operation, the outcome, the source and an error's kind. Resources
// past the first `max_resources` distinct ones are counted under resource="_other", so a program
// that makes strategies from user input cannot grow the exposition without bound.
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>

#include "redlimit/errors.hpp"
#include "redlimit/health.hpp"
#include "redlimit/metrics.hpp"

namespace redlimit {

class PrometheusSink : public MetricsSink {
 public:
  static constexpr const char* kContentType = "text/plain; version=0.0.4; charset=utf-8";
  static constexpr std::size_t kDefaultMaxResources = 64;
  // Upper bounds of the latency histogram, in seconds: 50 µs (a loopback round trip) to 1 s (well past
  // any sane command timeout), roughly 1-2.5-5 per decade.
  static constexpr std::array<double, 14> kBuckets{0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                                   0.01,    0.025,  0.05,    0.1,    0.25,  0.5,   1.0};

  explicit PrometheusSink(std::size_t max_resources = kDefaultMaxResources) : max_resources_(max_resources) {}

  void on_event(const MetricsEvent& e) noexcept override {
    try {
      std::lock_guard<std::mutex> lock(mutex_);
      const std::string& resource = resource_label(e.resource);
      const std::string strategy(e.strategy);
      const char* op = operation_name(e.operation);
      if (e.decision != nullptr) {
        const Decision& d = *e.decision;
        const char* outcome = d.shadow_rejected ? "shadow_rejected" : d.allowed ? "allowed" : "rejected";
        ++decisions_[{resource, strategy, op, outcome, to_string(d.source)}];
        if (d.source == Source::local_cache) ++local_cache_hits_[resource];
      } else if (e.exception != nullptr) {
        ++errors_[{op, error_kind(e.exception)}];
      }  // neither: a reset or unblock that went through, which decides nothing (its latency below)
      observe(op, std::chrono::duration<double>(e.latency).count());
    } catch (...) {
      // Out of memory while counting: the request matters more than its metric.
    }
  }

  void on_warning(std::string_view) noexcept override {
    std::lock_guard<std::mutex> lock(mutex_);
    ++warnings_;
  }

  // The exposition: every family with its HELP and TYPE once, samples sorted by labels. With a
  // Health (RateLimiter::health()), the breakers' states too.
  std::string render(const Health* health = nullptr) const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::string out;
    render_decisions(out);
    family(out, "redlimit_errors_total", "counter",
           "Calls that threw, by operation and error kind (outages the failure policy answered are "
           "decisions with source failure_policy or fallback).");
    for (const auto& [k, n] : errors_) {
      sample(out, "redlimit_errors_total", {{"operation", std::get<0>(k)}, {"kind", std::get<1>(k)}}, n);
    }
    family(out, "redlimit_local_cache_hits_total", "counter",
           "Consumes rejected by the local reject cache without asking Redis.");
    for (const auto& [r, n] : local_cache_hits_) sample(out, "redlimit_local_cache_hits_total", {{"resource", r}}, n);
    family(out, "redlimit_warnings_total", "counter", "Warnings the limiter gave (see MetricsSink::on_warning).");
    sample(out, "redlimit_warnings_total", {}, warnings_);
    family(out, "redlimit_resources_overflow_total", "counter",
           "Events counted under resource=\"_other\" because the resource cap was reached.");
    sample(out, "redlimit_resources_overflow_total", {}, overflow_);
    render_latency(out);
    if (health != nullptr) render_health(out, *health);
    return out;
  }
  std::string render(const Health& health) const { return render(&health); }

 private:
  using Labels = std::initializer_list<std::pair<const char*, std::string_view>>;
  struct Histogram {
    std::array<std::uint64_t, kBuckets.size()> buckets{};  // per bucket, not cumulative
    std::uint64_t count = 0;
    double sum = 0;
  };

  static const char* operation_name(Operation op) {
    switch (op) {
      case Operation::consume:
        return "consume";
      case Operation::peek:
        return "peek";
      case Operation::refund:
        return "refund";
      case Operation::block:
        return "block";
      case Operation::reset:
        return "reset";
      case Operation::unblock:
        return "unblock";
    }
    return "unknown";
  }

  // Most derived first: TimeoutError and AuthError are ConnectionErrors, UnavailableError a ReplyError.
  static const char* error_kind(const std::exception* e) {
    if (e == nullptr) return "unknown";
    if (dynamic_cast<const InvalidArgument*>(e) != nullptr) return "invalid_argument";
    if (dynamic_cast<const TimeoutError*>(e) != nullptr) return "timeout";
    if (dynamic_cast<const AuthError*>(e) != nullptr) return "auth";
    if (dynamic_cast<const ConnectionError*>(e) != nullptr) return "connection";
    if (dynamic_cast<const UnavailableError*>(e) != nullptr) return "unavailable";
    if (dynamic_cast<const ReplyError*>(e) != nullptr) return "reply";
    return "other";
  }

  // Labels are kept as written (valid UTF-8): two resources that differ only in bytes that are not
  // share one label, so they share its counters too (the same series twice would be a bad scrape).
  const std::string& resource_label(std::string_view resource) {
    static const std::string other = "_other";
    auto it = resources_.find(resource);  // a valid resource is its own label
    if (it != resources_.end()) return *it;
    std::string label = valid_utf8(resource);
    it = resources_.find(label);
    if (it != resources_.end()) return *it;
    if (resources_.size() >= max_resources_) {
      ++overflow_;
      return other;
    }
    return *resources_.emplace(std::move(label)).first;
  }

  void observe(const char* op, double seconds) {
    Histogram& h = latency_[op];
    std::size_t i = 0;
    while (i < kBuckets.size() && seconds > kBuckets[i]) ++i;
    if (i < kBuckets.size()) ++h.buckets[i];
    ++h.count;
    h.sum += seconds;
  }

  static void family(std::string& out, const char* name, const char* type, const char* help) {
    out += "# HELP ";
    out += name;
    out += ' ';
    out += help;
    out += "\n# TYPE ";
    out += name;
    out += ' ';
    out += type;
    out += '\n';
  }

  // Label values escaped as the format asks: backslash, double quote and newline; made valid UTF-8
  // first (a multibyte sequence holds none of the three).
  static void escape(std::string& out, std::string_view v) {
    for (char c : valid_utf8(v)) {
      if (c == '\\' || c == '"') {
        out += '\\';
        out += c;
      } else if (c == '\n') {
        out += "\\n";
      } else {
        out += c;
      }
    }
  }

  // `v` with each byte that begins no valid UTF-8 sequence written as U+FFFD, the replacement
  // character. A label value is UTF-8, and Prometheus refuses a whole scrape (every series of the
  // target, not just redlimit's) for one value that is not, while a resource may hold any bytes
  // ("caf\xe9", Latin-1).
  static std::string valid_utf8(std::string_view v) {
    std::string out;
    out.reserve(v.size());
    while (!v.empty()) {
      const std::size_t n = utf8_sequence(v);
      if (n == 0) {
        out += "\xEF\xBF\xBD";
      } else {
        out.append(v.substr(0, n));
      }
      v.remove_prefix(n == 0 ? 1 : n);
    }
    return out;
  }

  // The length (1 to 4) of the valid UTF-8 sequence `s` starts with, or 0 when its first byte begins
  // none: a continuation byte, an overlong form, a surrogate, a code point past U+10FFFF, a sequence
  // cut short. The second byte's bounds are those of RFC 3629's table.
  static std::size_t utf8_sequence(std::string_view s) {
    const auto byte = [s](std::size_t i) { return static_cast<unsigned char>(s[i]); };
    const unsigned char lead = byte(0);
    if (lead < 0x80) return 1;
    std::size_t n = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) {
      n = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      n = 3;
      if (lead == 0xE0) lo = 0xA0;  // below: overlong
      if (lead == 0xED) hi = 0x9F;  // above: surrogates
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      n = 4;
      if (lead == 0xF0) lo = 0x90;  // below: overlong
      if (lead == 0xF4) hi = 0x8F;  // above: past U+10FFFF
    } else {
      return 0;  // a continuation byte, C0 and C1 (overlong), F5 to FF
    }
    if (s.size() < n || byte(1) < lo || byte(1) > hi) return 0;
    for (std::size_t i = 2; i < n; ++i) {
      if (byte(i) < 0x80 || byte(i) > 0xBF) return 0;
    }
    return n;
  }

  template <class Value>
  static void sample(std::string& out, std::string_view name, Labels labels, Value value) {
    out += name;
    if (labels.size() > 0) {
      out += '{';
      bool first = true;
      for (const auto& [k, v] : labels) {
        if (!first) out += ',';
        first = false;
        out += k;
        out += "=\"";
        escape(out, v);
        out += '"';
      }
      out += '}';
    }
    out += ' ';
    out += number(value);
    out += '\n';
  }

  static std::string number(std::uint64_t v) { return std::to_string(v); }
  static std::string number(int v) { return std::to_string(v); }
  static std::string number(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", v);
    return buf;
  }

  void render_decisions(std::string& out) const {
    family(out, "redlimit_decisions_total", "counter",
           "Decisions by resource, strategy kind, operation, outcome and source.");
    for (const auto& [k, n] : decisions_) {
      const auto& [resource, strategy, op, outcome, source] = k;
      sample(out, "redlimit_decisions_total",
             {{"resource", resource}, {"strategy", strategy}, {"operation", op}, {"outcome", outcome},
              {"source", source}},
             n);
    }
  }

  void render_latency(std::string& out) const {
    family(out, "redlimit_call_duration_seconds", "histogram",
           "Wall time of limiter calls, round trip to Redis included, by operation.");
    for (const auto& [op, h] : latency_) {
      std::uint64_t cumulative = 0;
      for (std::size_t i = 0; i < kBuckets.size(); ++i) {
        cumulative += h.buckets[i];
        sample(out, "redlimit_call_duration_seconds_bucket", {{"operation", op}, {"le", number(kBuckets[i])}},
               cumulative);
      }
      sample(out, "redlimit_call_duration_seconds_bucket", {{"operation", op}, {"le", "+Inf"}}, h.count);
      sample(out, "redlimit_call_duration_seconds_sum", {{"operation", op}}, h.sum);
      sample(out, "redlimit_call_duration_seconds_count", {{"operation", op}}, h.count);
    }
  }

  static void render_health(std::string& out, const Health& health) {
    family(out, "redlimit_breaker_state", "gauge",
           "Circuit breaker per shard: 0 closed, 1 half-open, 2 open (absent without a breaker).");
    for (const auto& [shard, state] : health.breakers) {
      sample(out, "redlimit_breaker_state", {{"shard", std::to_string(shard)}}, static_cast<int>(state));
    }
    family(out, "redlimit_script_path", "gauge",
           "How the scripts are called: 1 for the path in use (functions, evalsha, or probe before the first "
           "call), per API (sync, async).");
    for (const ScriptPath p : {ScriptPath::functions, ScriptPath::evalsha, ScriptPath::probe}) {
      sample(out, "redlimit_script_path", {{"api", "sync"}, {"path", std::string(to_string(p))}},
             health.scripts == p ? 1 : 0);
      sample(out, "redlimit_script_path", {{"api", "async"}, {"path", std::string(to_string(p))}},
             health.async_scripts == p ? 1 : 0);
    }
  }

  const std::size_t max_resources_;
  mutable std::mutex mutex_;
  std::set<std::string, std::less<>> resources_;
  std::map<std::tuple<std::string, std::string, std::string, std::string, std::string>, std::uint64_t> decisions_;
  std::map<std::tuple<std::string, std::string>, std::uint64_t> errors_;
  std::map<std::string, std::uint64_t> local_cache_hits_;
  std::map<std::string, Histogram> latency_;
  std::uint64_t warnings_ = 0;
  std::uint64_t overflow_ = 0;
};

}  // namespace redlimit

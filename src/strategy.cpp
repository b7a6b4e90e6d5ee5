#include "redlimit/strategy.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "redlimit/detail/context.hpp"
#include "redlimit/detail/keys.hpp"
#include "redlimit/detail/script.hpp"
#include "redlimit/detail/scripted_strategy.hpp"
#include "redlimit/detail/scripts.hpp"
#include "redlimit/errors.hpp"

namespace redlimit {

namespace detail {

std::string Context::now_arg() const {
  if (options.time_source == TimeSource::redis) return "redis";
  return std::to_string(clock->now().count());
}

Decision decode_decision(const Reply& reply, const std::vector<std::int64_t>& limits) {
  if (reply.is_error()) throw ReplyError(fmt::format("error reply: {}", reply.str));
  if (reply.type != Reply::Type::array || (reply.elements.size() != 5 && reply.elements.size() != 6)) {
    throw ReplyError("a strategy script must return an array of 5 or 6 integers");
  }
  for (const auto& e : reply.elements) {
    if (e.type != Reply::Type::integer || e.integer < 0) {
      throw ReplyError("a strategy script must return non-negative integers");
    }
  }
  const auto& v = reply.elements;
  if (v[0].integer > 1) throw ReplyError("the allowed flag must be 0 or 1");
  std::size_t index = 0;
  if (v.size() == 6) {
    if (v[5].integer < 1 || static_cast<std::uint64_t>(v[5].integer) > limits.size()) {
      throw ReplyError(fmt::format("deciding limit {} is not in 1..{}", v[5].integer, limits.size()));
    }
    index = static_cast<std::size_t>(v[5].integer - 1);
  }
  if (limits.empty()) throw ReplyError("no limits to decode against");
  Decision d;
  d.allowed = v[0].integer == 1;
  d.limit = limits[index];
  d.remaining = v[1].integer;
  d.retry_after = std::chrono::microseconds{v[2].integer};
  d.reset_after = std::chrono::microseconds{v[3].integer};
  d.delay = std::chrono::microseconds{v[4].integer};
  d.limit_index = index;
  return d;
}

}  // namespace detail

Strategy::Strategy(std::shared_ptr<detail::Context> ctx, std::string resource, std::string kind,
                   const detail::Script& script, std::vector<std::int64_t> limits, std::vector<std::string> params)
    : ctx_(std::move(ctx)),
      resource_(std::move(resource)),
      kind_(std::move(kind)),
      script_(&script),
      limits_(std::move(limits)),
      params_(std::move(params)) {
  detail::check_resource(resource_);
}

std::string Strategy::key_for(std::string_view subject) const {
  detail::check_subject(subject);
  return detail::make_key(ctx_->options.prefix, resource_, subject, kind_);
}

std::string Strategy::block_key_for(std::string_view subject) const {
  detail::check_subject(subject);
  return detail::make_key(ctx_->options.prefix, resource_, subject, "blk");
}

void Strategy::check_cost(std::int64_t cost) const {
  const std::int64_t most = *std::min_element(limits_.begin(), limits_.end());
  if (cost < 1 || cost > most) {
    throw InvalidArgument(fmt::format("cost must be in [1, {}] for resource \"{}\", got {}", most, resource_, cost));
  }
}

Decision Strategy::run(const detail::Script& script, std::string_view subject, std::int64_t cost, const char* mode,
                       const std::vector<std::string>& params) const {
  const std::vector<std::string> keys{key_for(subject), block_key_for(subject)};
  std::vector<std::string> args;
  args.reserve(3 + params.size());
  std::unique_lock<std::mutex> lock(ctx_->mutex, std::defer_lock);
  if (!ctx_->connection->thread_safe()) lock.lock();
  args.push_back(ctx_->now_arg());
  args.push_back(std::to_string(cost));
  args.emplace_back(mode);
  args.insert(args.end(), params.begin(), params.end());
  return detail::decode_decision(detail::run_script(*ctx_->connection, script, keys, args), limits_);
}

Decision Strategy::consume(std::string_view subject, std::int64_t cost) const {
  check_cost(cost);
  return run(*script_, subject, cost, "1", params_);
}

Decision Strategy::peek(std::string_view subject, std::int64_t cost) const {
  check_cost(cost);
  return run(*script_, subject, cost, "0", params_);
}

Decision Strategy::refund(std::string_view subject, std::int64_t cost) const {
  check_cost(cost);
  return run(*script_, subject, cost, "2", params_);
}

Decision Strategy::block(std::string_view subject, std::chrono::microseconds duration) const {
  if (duration.count() <= 0 || duration > std::chrono::hours(24 * 365 * 10)) {
    throw InvalidArgument(fmt::format("block duration must be in (0, 10 years], got {}us", duration.count()));
  }
  Decision d = run(detail::scripts::block(), subject, 1, "3", {std::to_string(duration.count())});
  d.limit = *std::min_element(limits_.begin(), limits_.end());
  return d;
}

Decision Strategy::acquire(std::string_view subject, std::int64_t cost, std::chrono::microseconds max_wait) const {
  check_cost(cost);
  if (max_wait.count() < 0) throw InvalidArgument("max_wait must not be negative");
  Clock& clock = *ctx_->clock;
  const auto deadline = clock.now() + max_wait;
  while (true) {
    Decision d = consume(subject, cost);
    const auto left = deadline - clock.now();
    if (d.allowed) {
      if (d.delay.count() == 0) return d;
      if (d.delay > left) {
        // A shaper queued us too far back: give the place up rather than overstay max_wait.
        refund(subject, cost);
        d.allowed = false;
        d.retry_after = d.delay;
        return d;
      }
      clock.sleep_for(d.delay);
      return d;
    }
    if (d.retry_after > left) return d;
    clock.sleep_for(d.retry_after);
  }
}

void Strategy::reset(std::string_view subject) const {
  const std::vector<std::string> argv{"DEL", key_for(subject), block_key_for(subject)};
  std::unique_lock<std::mutex> lock(ctx_->mutex, std::defer_lock);
  if (!ctx_->connection->thread_safe()) lock.lock();
  const Reply r = ctx_->connection->command(argv);
  if (r.is_error()) throw ReplyError(fmt::format("DEL failed: {}", r.str));
}

}  // namespace redlimit

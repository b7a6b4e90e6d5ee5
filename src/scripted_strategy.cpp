#include "redlimit/detail/scripted_strategy.hpp"

#include <fmt/format.h>

#include "redlimit/detail/keys.hpp"
#include "redlimit/errors.hpp"

namespace redlimit::detail {

std::string Context::now_arg() const {
  if (options.time_source == TimeSource::redis) return "redis";
  return std::to_string(clock->now().count());
}

Decision decode_decision(const Reply& reply, std::int64_t limit) {
  if (reply.is_error()) throw ReplyError(fmt::format("error reply: {}", reply.str));
  if (reply.type != Reply::Type::array || reply.elements.size() != 5) {
    throw ReplyError("a strategy script must return an array of 5 integers");
  }
  for (const auto& e : reply.elements) {
    if (e.type != Reply::Type::integer || e.integer < 0) {
      throw ReplyError("a strategy script must return 5 non-negative integers");
    }
  }
  const auto& v = reply.elements;
  if (v[0].integer > 1) throw ReplyError("allowed flag must be 0 or 1");
  Decision d;
  d.allowed = v[0].integer == 1;
  d.limit = limit;
  d.remaining = v[1].integer;
  d.retry_after = std::chrono::microseconds{v[2].integer};
  d.reset_after = std::chrono::microseconds{v[3].integer};
  d.delay = std::chrono::microseconds{v[4].integer};
  return d;
}

ScriptedStrategy::ScriptedStrategy(std::shared_ptr<Context> ctx, std::string resource, std::string kind,
                                   const Script& script, std::int64_t limit, std::vector<std::string> params)
    : ctx_(std::move(ctx)),
      resource_(std::move(resource)),
      kind_(std::move(kind)),
      script_(&script),
      limit_(limit),
      params_(std::move(params)) {
  check_resource(resource_);
}

std::string ScriptedStrategy::key_for(std::string_view subject) const {
  check_subject(subject);
  return make_key(ctx_->options.prefix, resource_, subject, kind_);
}

Decision ScriptedStrategy::run(std::string_view subject, std::int64_t cost, bool record) const {
  if (cost < 1 || cost > limit_) {
    throw InvalidArgument(fmt::format("cost must be in [1, {}] for resource \"{}\", got {}", limit_, resource_, cost));
  }
  std::vector<std::string> keys{key_for(subject)};
  std::vector<std::string> args;
  args.reserve(3 + params_.size());
  std::lock_guard<std::mutex> lock(ctx_->mutex);
  args.push_back(ctx_->now_arg());
  args.push_back(std::to_string(cost));
  args.emplace_back(record ? "1" : "0");
  args.insert(args.end(), params_.begin(), params_.end());
  return decode_decision(run_script(*ctx_->connection, *script_, keys, args), limit_);
}

void ScriptedStrategy::remove(std::string_view subject) const {
  std::vector<std::string> argv{"DEL", key_for(subject)};
  std::lock_guard<std::mutex> lock(ctx_->mutex);
  const Reply r = ctx_->connection->command(argv);
  if (r.is_error()) throw ReplyError(fmt::format("DEL failed: {}", r.str));
}

}  // namespace redlimit::detail

#pragma once
// The machinery every Redis strategy shares: validate, build the key, run the strategy's script
// (ARGV[1] = now, ARGV[2] = cost, ARGV[3] = 1 consume / 0 peek, then the strategy's parameters),
// and decode its reply {allowed, remaining, retry_after_us, reset_after_us, delay_us}.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "redlimit/decision.hpp"
#include "redlimit/detail/context.hpp"
#include "redlimit/detail/script.hpp"

namespace redlimit::detail {

// Decodes a strategy script's reply into a Decision. Throws ReplyError for anything but an array of
// five non-negative integers with allowed in {0, 1}.
Decision decode_decision(const Reply& reply, std::int64_t limit);

class ScriptedStrategy {
 public:
  const std::string& resource() const { return resource_; }
  // The Redis key holding `subject`'s state (validates the subject).
  std::string key_for(std::string_view subject) const;

 protected:
  ScriptedStrategy(std::shared_ptr<Context> ctx, std::string resource, std::string kind,
                   const Script& script, std::int64_t limit, std::vector<std::string> params);

  Decision run(std::string_view subject, std::int64_t cost, bool record) const;
  void remove(std::string_view subject) const;

 private:
  std::shared_ptr<Context> ctx_;
  std::string resource_;
  std::string kind_;
  const Script* script_;
  std::int64_t limit_;
  std::vector<std::string> params_;
};

}  // namespace redlimit::detail

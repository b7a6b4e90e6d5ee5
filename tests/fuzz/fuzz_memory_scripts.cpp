// The in-memory backend's script calls (MemoryConnection::command: EVALSHA of each of redlimit's
// scripts) on arbitrary heads, parameters, costs, clocks and batches, a few calls in a row against
// keys that may hold anything: the backend runs inside the user's process, so no call may crash it
// or reach undefined behaviour (ASan and UBSan: overflow, division by zero). Every call answers an
// array or an error, and every key a call creates carries a TTL.
#include <fuzzer/FuzzedDataProvider.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fuzz_check.hpp"
#include "redlimit/clock.hpp"
#include "redlimit/detail/scripts.hpp"
#include "redlimit/transport/memory_connection.hpp"

namespace {

namespace scripts = redlimit::detail::scripts;
using redlimit::Reply;

constexpr std::int64_t kT0 = 1'699'999'200'000'000;
const std::array<std::string, 4> kKeys = {"r:{a}:s", "r:{a}:b", "r:{b}:s", "r:{b}:b"};

// A number as the client writes one, or near the bounds the scripts check, or anything at all.
std::string number(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 5)) {
    case 0:
      return std::to_string(in.ConsumeIntegralInRange<std::int64_t>(0, 10));
    case 1:
      return std::to_string(in.ConsumeIntegralInRange<std::int64_t>(0, 100'000'000));
    case 2:
      return std::to_string(in.ConsumeIntegralInRange<std::int64_t>(0, std::int64_t{1} << 50));
    case 3:
      return std::to_string(in.ConsumeIntegral<std::int64_t>());
    case 4:
      return std::to_string(std::int64_t{1} << in.ConsumeIntegralInRange<int>(0, 62));
    default:
      return in.ConsumeRandomLengthString(24);
  }
}

// A parameter word: a number, a tag ("<n><unit>[@<n><unit>]"), a leaky bucket's mode, or bytes.
std::string word(FuzzedDataProvider& in) {
  static constexpr const char* kUnits[] = {"us", "ms", "s", "m", "h", "d", "x"};
  const auto unit = [&] { return std::string(kUnits[in.ConsumeIntegralInRange<std::size_t>(0, 6)]); };
  switch (in.ConsumeIntegralInRange<int>(0, 3)) {
    case 0:
      return number(in);
    case 1: {
      std::string tag = std::to_string(in.ConsumeIntegralInRange<int>(0, 100)) + unit();
      if (in.ConsumeBool()) tag += "@" + std::to_string(in.ConsumeIntegralInRange<int>(0, 100)) + unit();
      return tag;
    }
    case 2:
      return in.ConsumeBool() ? "meter" : "shaper";
    default:
      return in.ConsumeRandomLengthString(12);
  }
}

const redlimit::detail::Script& script_of(int i) {
  switch (i) {
    case 0:
      return scripts::fixed_window();
    case 1:
      return scripts::sliding_log();
    case 2:
      return scripts::policy();
    case 3:
      return scripts::token_bucket();
    case 4:
      return scripts::leaky_bucket();
    default:
      return scripts::block();
  }
}

// One EVALSHA: keys for 1 to 3 requests, a now near kT0 (or anything), the head, later costs.
std::vector<std::string> call(FuzzedDataProvider& in, std::int64_t& clock_us) {
  const redlimit::detail::Script& script = script_of(in.ConsumeIntegralInRange<int>(0, 5));
  const std::size_t per = scripts::keys_per_request(script);
  const std::size_t requests = script.name == "block" ? 1 : in.ConsumeIntegralInRange<std::size_t>(1, 3);
  std::vector<std::string> argv = {"EVALSHA", script.sha1, std::to_string(requests * per)};
  for (std::size_t r = 0; r < requests; ++r) {
    const std::size_t subject = in.ConsumeIntegralInRange<std::size_t>(0, 1);
    argv.push_back(kKeys[2 * subject]);
    if (per == 2) argv.push_back(kKeys[2 * subject + 1]);
  }
  clock_us += in.ConsumeIntegralInRange<std::int64_t>(-2'000'000, 90'000'000);
  argv.push_back(in.ConsumeIntegralInRange<int>(0, 9) == 0 ? number(in) : std::to_string(clock_us));
  std::string head = std::to_string(in.ConsumeIntegralInRange<int>(0, 4)) + " " +
                     (in.ConsumeBool() ? std::to_string(in.ConsumeIntegralInRange<int>(0, 12)) : number(in));
  const std::size_t words = in.ConsumeIntegralInRange<std::size_t>(0, 10);
  for (std::size_t i = 0; i < words; ++i) head += " " + word(in);
  argv.push_back(head);
  if (requests > 1 && in.ConsumeBool()) {
    for (std::size_t r = 1; r < requests; ++r) argv.push_back(in.ConsumeBool() ? "1" : number(in));
  }
  return argv;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  std::int64_t clock_us = kT0;
  auto clock = std::make_shared<redlimit::ManualClock>(redlimit::Micros{clock_us});
  redlimit::MemoryConnection memory(clock);
  if (in.ConsumeBool()) {  // a key that holds something else: a string of any bytes, no TTL
    memory.command({"SET", kKeys[in.ConsumeIntegralInRange<std::size_t>(0, 3)], in.ConsumeRandomLengthString(40)});
  }
  const int calls = in.ConsumeIntegralInRange<int>(1, 4);
  for (int c = 0; c < calls && in.remaining_bytes() > 0; ++c) {
    const std::vector<std::string> argv = call(in, clock_us);
    clock->set(redlimit::Micros{clock_us});
    std::array<bool, 4> existed{};
    for (std::size_t k = 0; k < kKeys.size(); ++k) existed[k] = memory.expires_at(kKeys[k]).has_value();
    const Reply r = memory.command(argv);
    // an integer: one request's admission, packed (lua/epilogue.lua, reply), never negative
    FUZZ_CHECK(r.type == Reply::Type::array || r.type == Reply::Type::error ||
                   (r.type == Reply::Type::integer && r.integer >= 0),
               "reply type %d: %s", static_cast<int>(r.type), r.str.c_str());
    for (std::size_t k = 0; k < kKeys.size(); ++k) {
      const std::optional<redlimit::Micros> at = memory.expires_at(kKeys[k]);
      FUZZ_CHECK(existed[k] || !at || *at != redlimit::Micros::max(), "%s created without a TTL by %s ... %s",
                 kKeys[k].c_str(), argv[0].c_str(), argv.back().c_str());
    }
  }
  return 0;
}

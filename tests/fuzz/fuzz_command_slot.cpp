// command_slot (cluster routing) on arbitrary argv: never crashes, returns -1 or a slot in
// [0, 16383], and the slot is the one Redis computes (slot_ref in fuzz_check.hpp: keyHashSlot,
// transcribed with an independent CRC16) for the command's first key: EVAL/EVALSHA/FCALL/FCALL_RO's
// first key after numkeys, otherwise argv[1]; and to_every_master holds for FUNCTION LOAD and SCRIPT LOAD only.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.hpp"
#include "redlimit/transport/cluster_connection.hpp"

namespace {

std::string upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static constexpr const char* kVerbs[] = {"EVALSHA", "evalsha", "EVAL",    "eval",  "GET",      "DEL",
                                           "PING",    "INFO",    "SCRIPT",  "cluster", "HGETALL", "TTL",
                                           "FCALL",   "fcall_ro", "FUNCTION", "function"};
  FuzzedDataProvider in(data, size);
  const std::size_t argc = in.ConsumeIntegralInRange<std::size_t>(0, 8);
  std::vector<std::string> argv;
  for (std::size_t i = 0; i < argc; ++i) {
    if (i == 0 && in.ConsumeBool()) {
      argv.emplace_back(kVerbs[in.ConsumeIntegralInRange<std::size_t>(0, std::size(kVerbs) - 1)]);
    } else {
      argv.push_back(in.ConsumeRandomLengthString(200));
    }
  }

  const int slot = redlimit::command_slot(argv);
  FUZZ_CHECK(slot >= -1 && slot <= 16383, "slot %d", slot);

  int expected = -1;
  if (!argv.empty()) {
    const std::string verb = upper(argv[0]);
    if (verb == "EVAL" || verb == "EVALSHA" || verb == "FCALL" || verb == "FCALL_RO") {
      if (argv.size() >= 4 && argv[2] != "0") expected = slot_ref(argv[3]);
    } else if (verb != "PING" && verb != "INFO" && verb != "SCRIPT" && verb != "FUNCTION" && verb != "CLUSTER" &&
               argv.size() >= 2) {
      expected = slot_ref(argv[1]);
    }
  }
  FUZZ_CHECK(slot == expected, "command_slot %d, Redis would route by slot %d", slot, expected);
  const bool everywhere =
      argv.size() >= 2 && (upper(argv[0]) == "FUNCTION" || upper(argv[0]) == "SCRIPT") && upper(argv[1]) == "LOAD";
  FUZZ_CHECK(redlimit::to_every_master(argv) == everywhere, "to_every_master %d", everywhere ? 0 : 1);
  return 0;
}

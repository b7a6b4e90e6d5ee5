// Limit::parse and parse_limits on arbitrary bytes: only InvalidArgument may escape. Whatever parses
// is a valid limit (count in [1, max_count], window in (0, max_window], a precision that divides the
// window), and its canonical text parses back to the same limit: Limit::parse(l.to_string()) == l.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/limit.hpp"

namespace {

using redlimit::Limit;

void check_limit(const Limit& l) {
  FUZZ_CHECK(l.count() >= 1 && l.count() <= Limit::max_count(), "count %lld", static_cast<long long>(l.count()));
  const auto w = l.window().count(), p = l.precision().count();
  FUZZ_CHECK(w > 0 && w <= Limit::max_window().count(), "window %lld", static_cast<long long>(w));
  FUZZ_CHECK(p > 0 && p <= w && w % p == 0, "precision %lld for window %lld", static_cast<long long>(p),
             static_cast<long long>(w));
  const std::string text = l.to_string();
  Limit back = Limit::per_second(1);
  try {
    back = Limit::parse(text);
  } catch (const redlimit::InvalidArgument& e) {
    FUZZ_CHECK(false, "canonical form \"%s\" rejected: %s", text.c_str(), e.what());
  }
  FUZZ_CHECK(back == l, "\"%s\" parses to \"%s\"", text.c_str(), back.to_string().c_str());
  FUZZ_CHECK(back.to_string() == text, "canonical form not stable: \"%s\" then \"%s\"", text.c_str(),
             back.to_string().c_str());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);

  bool single_ok = false;
  Limit single = Limit::per_second(1);
  try {
    single = Limit::parse(input);
    single_ok = true;
    check_limit(single);
  } catch (const redlimit::InvalidArgument&) {
  }

  std::vector<Limit> limits;
  bool many_ok = false;
  try {
    limits = redlimit::parse_limits(input);
    many_ok = true;
  } catch (const redlimit::InvalidArgument&) {
  }
  if (input.find_first_of(";,") == std::string_view::npos) {
    FUZZ_CHECK(single_ok == many_ok, "Limit::parse %s what parse_limits %s", single_ok ? "accepted" : "rejected",
               many_ok ? "accepted" : "rejected");
    if (many_ok) FUZZ_CHECK(limits.size() == 1 && limits[0] == single, "parse_limits and Limit::parse disagree");
  }
  if (many_ok) {
    std::size_t parts = 1;
    for (char c : input) parts += (c == ';' || c == ',') ? 1 : 0;
    FUZZ_CHECK(limits.size() == parts, "%zu limits from %zu parts", limits.size(), parts);
    std::string joined;
    for (const Limit& l : limits) {
      check_limit(l);
      joined += (joined.empty() ? "" : "; ") + l.to_string();
    }
    std::vector<Limit> again;
    try {
      again = redlimit::parse_limits(joined);
    } catch (const redlimit::InvalidArgument& e) {
      FUZZ_CHECK(false, "\"%s\" rejected: %s", joined.c_str(), e.what());
    }
    FUZZ_CHECK(again == limits, "\"%s\" does not parse back to the same limits", joined.c_str());
  }
  return 0;
}

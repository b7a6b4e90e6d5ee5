#pragma once
// What the sliding log's tests read and plant under its key (lua/sliding_log.lua): its entries in
// either form, decoded independently of the script's and the CLI's readers.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "support/fixture.hpp"

namespace redlimit_test {

// An entry as either form writes it: text "<cum>/<cost>" scored by its time, or compact
// pack('>I7I6I7', cum, cost, time).
struct SlidingLogEntry {
  std::int64_t cum = 0, cost = 0, time = 0;
  bool compact = false;
  std::int64_t score = 0;
};

inline std::int64_t big_endian(const std::string& s, std::size_t from, std::size_t n) {
  std::int64_t v = 0;
  for (std::size_t i = from; i < from + n; ++i) v = v * 256 + static_cast<unsigned char>(s[i]);
  return v;
}

inline SlidingLogEntry decode_entry(const std::string& member, const std::string& score) {
  SlidingLogEntry e;
  e.score = std::stoll(score);
  if (member.size() == 20 && static_cast<unsigned char>(member[0]) < '0') {
    e = {big_endian(member, 0, 7), big_endian(member, 7, 6), big_endian(member, 13, 7), true, e.score};
  } else {
    const std::size_t slash = member.find('/');
    e.cum = std::stoll(member.substr(0, slash));
    e.cost = std::stoll(member.substr(slash + 1));
    e.time = e.score;
  }
  return e;
}

// A text member as every build writes it: cum zero-padded to 16 digits, '/', the cost.
inline std::string text_member(std::int64_t cum, std::int64_t cost) {
  std::string c = std::to_string(cum);
  if (c.size() < 16) c.insert(0, 16 - c.size(), '0');
  return c + "/" + std::to_string(cost);
}

class SlidingLogFixture : public StrictRedisTest {
 protected:
  // A limiter on this test's server and clock writing entries in the form given; the same in memory.
  redlimit::RateLimiter writing(redlimit::SlidingLogMembers members) {
    return redlimit::RateLimiter::connect(server().url(), options_writing(members));
  }
  redlimit::RateLimiter in_memory_writing(redlimit::SlidingLogMembers members) {
    return redlimit::RateLimiter::in_memory(options_writing(members));
  }
  redlimit::Options options_writing(redlimit::SlidingLogMembers members) {
    redlimit::Options o = options();
    o.sliding_log_members = members;
    return o;
  }
  // An entry no redlimit client wrote here (another program's, or an earlier build's), dated now
  // unless `at` is given, in a log living an hour.
  void plant(const std::string& key, const std::string& member, std::optional<Micros> at = std::nullopt) {
    server().command({"ZADD", key, std::to_string(at.value_or(clock->now()).count()), member});
    server().command({"PEXPIRE", key, "3600000"});
  }
  // body(form, limiter) once per entry form, with a limiter writing it, on an empty server.
  template <typename Body>
  void each_form(Body body) {
    for (const redlimit::SlidingLogMembers form :
         {redlimit::SlidingLogMembers::text, redlimit::SlidingLogMembers::compact}) {
      SCOPED_TRACE(form == redlimit::SlidingLogMembers::compact ? "compact" : "text");
      server().command({"FLUSHALL"});
      body(form, writing(form));
    }
  }
  // Calls of `command` counted by INFO commandstats since the last CONFIG RESETSTAT.
  std::int64_t calls_of(const std::string& command) {
    const std::string info = server().command({"INFO", "commandstats"}).str;
    const std::string tag = "cmdstat_" + command + ":calls=";
    const std::size_t at = info.find(tag);
    return at == std::string::npos ? 0 : std::stoll(info.substr(at + tag.size()));
  }
  std::vector<SlidingLogEntry> entries(const redlimit::SlidingLog& sl, std::string_view subject) {
    const redlimit::Reply r = server().command({"ZRANGE", sl.key_for(subject), "0", "-1", "WITHSCORES"});
    std::vector<SlidingLogEntry> out;
    for (std::size_t i = 0; i + 1 < r.elements.size(); i += 2)
      out.push_back(decode_entry(r.elements[i].str, r.elements[i + 1].str));
    return out;
  }
};

}  // namespace redlimit_test

#pragma once
// Golden traces: what a real Redis answered to the commands a fixed list of scenarios sends
// (scenarios.cpp), written to tests/golden/<scenario>.trace by scripts/record_golden.sh and replayed
// against MemoryConnection by the unit suite (tests/unit/golden_test.cpp), with no server. The
// integration suite records the scenarios again against its live server and compares
// (tests/integration/golden_test.cpp), so the checked-in traces stay true to Redis.
//
// A trace is text, one item a line, diff-friendly:
//   # comment
//   script <name> <sha1>              the SHA1 of every embedded script when the trace was recorded
//   @ <us>                            the client clock (ManualClock) at the next command
//   @ redis <before> <after>          or: the next command reads Redis TIME (ARGV[1] = "redis"), which
//                                     was between these two instants (us)
//   > "ARG" "ARG" ...                 a command
//   < <reply>                         its reply: :<int>  _ (nil)  $"<bytes>"  +"<status>"  -"<error>"
//                                     [<reply> ...] (array)
// Strings are quoted, with \\, \" and \xNN for any byte outside printable ASCII.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "redlimit/reply.hpp"
#include "redlimit/transport/connection.hpp"

namespace redlimit_golden {

struct Command {
  std::int64_t at = 0;           // the client clock
  bool redis_time = false;       // ARGV[1] was "redis": the server's TIME was in [time_before, time_after]
  std::int64_t time_before = 0;
  std::int64_t time_after = 0;
  std::vector<std::string> argv;
  redlimit::Reply reply;
};

struct Trace {
  std::string scenario;
  std::map<std::string, std::string> scripts;  // name -> SHA1 at recording time
  std::vector<Command> commands;
};

std::string format(const Trace& trace);
// Throws std::runtime_error naming the line of anything it cannot read.
Trace parse(const std::string& text, const std::string& scenario);

std::string show(const redlimit::Reply& r);
std::string show(const std::vector<std::string>& argv);

// The scenarios, by name, in order.
std::vector<std::string> scenario_names();

// Runs `scenario` against `redis` (a connection to a real server, used for the commands, TIME,
// SCRIPT LOAD and the wrong-type setup) and returns its trace. Deletes every "golden:*" key first.
Trace record(const std::string& scenario, const std::shared_ptr<redlimit::Connection>& redis);

// Replays `trace` against a fresh MemoryConnection on a ManualClock set to each command's time.
// Returns one line per difference (empty: the memory backend answered what Redis answered).
std::vector<std::string> replay(const Trace& trace);

// Compares a trace recorded now with the checked-in one: the same commands, the same replies (errors
// by their code; under Redis TIME, which differs between the two recordings, the decisions' fields
// that do not depend on the server's clock).
std::vector<std::string> compare(const Trace& expected, const Trace& actual);

}  // namespace redlimit_golden

#pragma once
// How the decision path calls the Lua scripts on one connection (docs/performance.md, "Redis
// Functions"): as Redis Functions (FCALL of a library loaded once per server, persisted and
// replicated with the data) or as EVALSHA of scripts cached per server process. A transport that
// talks to Redis (RedisConnection, ConnectionPool, SentinelConnection, AsyncRedis, and a cluster
// router, which loads the library on every master) starts at `probe`, and its first calls are
// FCALLs: one that runs settles it on `functions`; "Function not found" (a fresh server) sends
// FUNCTION LOAD once, with the calls again behind it, and settles on `functions`; an FCALL the
// server does not know (Redis < 7.0) or an ACL user may not run, or a LOAD the user may not send
// while the library is absent, settles on `evalsha`. Everything else (the in-memory backend, test
// doubles) stays on `evalsha`.
// Options::redis_functions = false keeps a limiter on `evalsha`.
// Apart from the path, a connection learns once whether its server predates Redis 7.0 (FCALL an
// unknown command, or a script refused for its first line, the `#!lua` shebang that 7.0
// introduced): it then sends each script without that line (Script::legacy_source), which such a
// server runs as it ran scripts before.
#include <atomic>
#include <string_view>

namespace redlimit {

enum class ScriptPath { evalsha, probe, functions };

inline std::string_view to_string(ScriptPath p) {
  switch (p) {
    case ScriptPath::evalsha: return "evalsha";
    case ScriptPath::probe: return "probe";
    case ScriptPath::functions: return "functions";
  }
  return "evalsha";
}

// The path of one connection; read on every call, written when it settles (any thread).
class ScriptPathState {
 public:
  explicit ScriptPathState(ScriptPath initial = ScriptPath::evalsha) : path_(initial) {}
  // A moved transport (RedisConnection is movable) keeps what its connection settled on.
  ScriptPathState(const ScriptPathState& o) : path_(o.get()), before_7_(o.server_before_7()) {}
  ScriptPathState& operator=(const ScriptPathState& o) {
    set(o.get());
    before_7_.store(o.server_before_7(), std::memory_order_relaxed);
    return *this;
  }
  ScriptPath get() const { return path_.load(std::memory_order_relaxed); }
  void set(ScriptPath p) { path_.store(p, std::memory_order_relaxed); }
  // The server predates Redis 7.0: scripts go without their shebang line (see above). Never unset:
  // a server replaced by a newer one under the same connection runs those scripts just as well.
  bool server_before_7() const { return before_7_.load(std::memory_order_relaxed); }
  void set_server_before_7() { before_7_.store(true, std::memory_order_relaxed); }

 private:
  std::atomic<ScriptPath> path_;
  std::atomic<bool> before_7_{false};
};

}  // namespace redlimit

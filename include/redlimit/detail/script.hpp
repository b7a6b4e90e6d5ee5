#pragma once
// A Lua script known by its SHA1, run with EVALSHA; on NOSCRIPT (after SCRIPT FLUSH, a restart or a
// failover) it is sent once with EVAL, which also caches it. Only a NOSCRIPT reply triggers that
// second send: NOSCRIPT means the script did not run, so nothing is counted twice. A transport error
// is thrown to the caller and never replayed, because the script may have run.
#include <string>
#include <string_view>
#include <vector>

#include "redlimit/transport/connection.hpp"

namespace redlimit::detail {

struct Script {
  std::string_view name;
  std::string_view source;
  std::string sha1;  // lowercase hex of SHA1(source), as Redis computes it

  Script(std::string_view name, std::string_view source);
};

// The EVALSHA command for `script` (exposed for pipelining and for unit tests).
std::vector<std::string> evalsha_command(const Script& script, const std::vector<std::string>& keys,
                                         const std::vector<std::string>& args);

// The EVAL command for `script`: sent after NOSCRIPT.
std::vector<std::string> eval_command(const Script& script, const std::vector<std::string>& keys,
                                      const std::vector<std::string>& args);

// Throws for an error reply: UnavailableError for LOADING, BUSY, MASTERDOWN, CLUSTERDOWN, TRYAGAIN,
// READONLY and OOM (the script did not run; the failure policy applies), ReplyError otherwise.
void check_script_reply(const Script& script, const Reply& reply);

// Runs the script; returns its reply. Throws ReplyError on any error reply other than NOSCRIPT.
Reply run_script(Connection& conn, const Script& script, const std::vector<std::string>& keys,
                 const std::vector<std::string>& args);

// True for a NOSCRIPT error reply.
bool is_noscript(const Reply& r);

}  // namespace redlimit::detail

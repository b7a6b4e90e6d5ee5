#pragma once
// A Lua script known by its SHA1 and by its Redis Function's name, and the send step of the
// decision path. On a connection whose ScriptPath is `functions` (or `probe`), FCALL: the library
// is loaded once per server (FUNCTION LOAD, persisted and replicated with the data), when an FCALL
// finds it missing ("Function not found": a fresh server, FUNCTION FLUSH), once for every call that
// missed it; a server without Functions, or an ACL user denied them, moves the connection to
// `evalsha` for good.
// EVALSHA; on NOSCRIPT (after SCRIPT FLUSH, a restart or a failover) one SCRIPT LOAD, with every
// EVALSHA of the round trip that missed behind it, so the script's body is sent once however many
// calls missed (the async step: once per connection, send_script_call_async); a call that misses
// again (the LOAD refused) goes as EVAL. Only replies that say the script did not run (NOSCRIPT,
// Function not found, FCALL unknown or denied) trigger another send, so nothing is counted twice. A
// transport error is thrown to the caller and never replayed, because the script may have run.
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "redlimit/detail/config.hpp"
#include "redlimit/transport/async_connection.hpp"
#include "redlimit/transport/connection.hpp"

namespace redlimit::detail {

struct Script {
  std::string_view name;
  std::string_view source;
  std::string sha1;          // lowercase hex of SHA1(source), as Redis computes it
  // The source without its first line, the `#!lua` shebang, which a server older than Redis 7.0
  // cannot compile (ScriptPathState::server_before_7), and its SHA1. Such a server runs it as a
  // script without flags: it meets a replica's or maxmemory's refusal at its first write, before
  // anything is written (detail::from_hiredis reads that reply as 7.0's refusal).
  std::string_view legacy_source;
  std::string legacy_sha1;
  std::string_view function;  // its name in the Functions library (scripts::library()); empty: none
  // The function deciding requests of many slots of one cluster node in one call (ScriptCall::spread);
  // empty when the script has none.
  std::string_view spread_function;

  Script(std::string_view name, std::string_view source, std::string_view function = {},
         std::string_view spread_function = {});
};

// One script call: its KEYS and its ARGV.
struct ScriptCall {
  std::vector<std::string> keys;
  std::vector<std::string> args;
  // The keys lie in several hash slots of one cluster node: the call declares only the first key
  // (the one the call is routed by) and sends the others among its arguments, which the script's
  // spread_function takes (cmake/embed_lua.cmake), and over EVALSHA its EVAL text
  // (lua/spread_eval.lua; its shebang allows keys of many slots, and a server older than 7.0 runs
  // it without that line). A node that no longer serves one of the keys refuses the call before
  // it writes (a moving slot): the decision path sends it again slot by slot.
  bool spread = false;
};

// The FCALL command for a call of `script`.
std::vector<std::string> fcall_command(const Script& script, const ScriptCall& call);

// True for an FCALL reply that says the function did not run because this server lacks it (a
// fresh or flushed server): loading the library and calling again is safe.
bool is_function_missing(const Reply& r);
// True for an FCALL reply that says this server will not run Functions for us (Redis < 7.0, or an
// ACL user denied FCALL): the call did not run; EVALSHA it instead.
bool is_fcall_refused(const Reply& r);

// The EVALSHA command for `script` (exposed for pipelining and for unit tests); `before_7`: of its
// legacy_source, for a server older than Redis 7.0.
std::vector<std::string> evalsha_command(const Script& script, const std::vector<std::string>& keys,
                                         const std::vector<std::string>& args, bool before_7 = false);
// The same for a call: a spread call declares its first key alone and sends "spread", the number
// of keys, the keys, then its arguments (lua/spread_eval.lua).
std::vector<std::string> evalsha_call_command(const Script& script, const ScriptCall& call, bool before_7);

// The EVAL command for a call of `script` (in the same form): sent for a call that met NOSCRIPT
// again behind a SCRIPT LOAD.
std::vector<std::string> eval_call_command(const Script& script, const ScriptCall& call, bool before_7);

// True for a reply that refused to compile a script for its `#!lua` first line: a server older than
// Redis 7.0. The script did not run; its legacy_source will.
bool is_shebang_refused(const Reply& r);

// True for a NOSCRIPT error reply.
bool is_noscript(const Reply& r);

// True for an error reply that says the server cannot serve now, whatever the request: the script
// did not run, and the failure policy answers (docs/reliability.md, "Error replies"). Every other
// error reply is a usage error: about this request (a wrong key type, a script error), thrown.
bool is_outage_reply(std::string_view error);

// Throws for an error reply: UnavailableError for an outage reply (is_outage_reply), ReplyError
// otherwise. The message names `who` (the strategy the user built), or the script.
void check_script_reply(const Script& script, const Reply& reply, std::string_view who = {});

// The synchronous send step: `calls` in one round trip (a command, or a pipeline), EVALSHA first;
// those that came back NOSCRIPT again behind one SCRIPT LOAD (one round trip), and EVAL for any
// that miss once more. Returns one reply per call, error replies included (the caller judges them
// call by call); throws ConnectionError / TimeoutError when the round trip failed.
std::vector<Reply> send_script_calls(Connection& conn, const Script& script, const std::vector<ScriptCall>& calls);

// The asynchronous send step: one call over an AsyncConnection. Many calls are in flight at once,
// so NOSCRIPT is handled per connection rather than per call: the first call to meet it queues one
// SCRIPT LOAD and sends its EVALSHA again, behind the LOAD; every call meeting NOSCRIPT while that
// LOAD is on its way only sends its EVALSHA again. A call meeting NOSCRIPT a second time falls back
// to EVAL, so nothing loops. The call takes one deadline when it starts (conn->call_deadline()) and
// every send of it carries that one (command_async_until): the reload and re-send get what is left.
// Exactly one of on_reply / on_error runs later, on the connection's loop thread (or at once, if the
// first send throws: then neither runs and the exception propagates).
// `deadline`: the call's, when it was taken earlier (calls merged by detail/async_lane.hpp keep the
// first one's); none given = conn->call_deadline() now.
void send_script_call_async(const std::shared_ptr<AsyncConnection>& conn, const Script& script, const ScriptCall& call,
                            std::function<void(Reply)> on_reply, std::function<void(std::exception_ptr)> on_error,
                            std::optional<AsyncConnection::Deadline> deadline = std::nullopt);

// One call, checked: its reply, or a throw as check_script_reply() says (the fallback and tests).
Reply run_script(Connection& conn, const Script& script, const std::vector<std::string>& keys,
                 const std::vector<std::string>& args);

}  // namespace redlimit::detail

#ifdef REDLIMIT_HEADER_ONLY
#include "redlimit/impl/script-inl.hpp"
#include "redlimit/impl/script_async-inl.hpp"
#endif

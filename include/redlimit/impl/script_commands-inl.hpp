#pragma once
// Bodies of redlimit/detail/script.hpp, first part: a Script, the commands that call it (EVALSHA,
// EVAL, FCALL, each in its spread form), and the classes of their replies (did the script run; an
// outage or a usage error). The rules that settle a connection's script path and the synchronous
// send step: script-inl.hpp; the asynchronous one: script_async-inl.hpp.
#include "redlimit/detail/message.hpp"
#include "redlimit/detail/script.hpp"
#include "redlimit/detail/sha1.hpp"
#include "redlimit/errors.hpp"

namespace redlimit::detail {

REDLIMIT_INLINE Script::Script(std::string_view script_name, std::string_view script_source,
                               std::string_view function_name, std::string_view spread_function_name)
    : name(script_name),
      source(script_source),
      sha1(sha1_hex(script_source)),
      legacy_source(script_source.rfind("#!", 0) == 0 ? script_source.substr(script_source.find('\n') + 1)
                                                      : script_source),
      legacy_sha1(sha1_hex(legacy_source)),
      function(function_name),
      spread_function(spread_function_name) {}

namespace script_impl {

REDLIMIT_INLINE std::vector<std::string> eval_like(std::string verb, std::string_view body,
                                                   const std::vector<std::string>& keys,
                                                   const std::vector<std::string>& args) {
  std::vector<std::string> argv;
  argv.reserve(3 + keys.size() + args.size());
  argv.push_back(std::move(verb));
  argv.emplace_back(body);
  argv.push_back(std::to_string(keys.size()));
  argv.insert(argv.end(), keys.begin(), keys.end());
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

// A spread call (ScriptCall::spread) as <verb> <body> 1 <first key> [<marker>] <number of keys>
// <keys...> <args...>: the first key declared alone (it routes the call), the others among the
// arguments, where the library's <name>_spread functions (no marker) and the EVAL text (marker
// "spread": lua/spread_eval.lua) take them.
REDLIMIT_INLINE std::vector<std::string> spread_like(std::string verb, std::string_view body, const ScriptCall& call,
                                                     std::string_view marker) {
  std::vector<std::string> argv;
  argv.reserve(6 + call.keys.size() + call.args.size());
  argv.push_back(std::move(verb));
  argv.emplace_back(body);
  argv.emplace_back("1");
  argv.push_back(call.keys.front());
  if (!marker.empty()) argv.emplace_back(marker);
  argv.push_back(std::to_string(call.keys.size()));
  argv.insert(argv.end(), call.keys.begin(), call.keys.end());
  argv.insert(argv.end(), call.args.begin(), call.args.end());
  return argv;
}

// EVALSHA or EVAL of `body` for a call, a spread call in the spread form: the EVAL text of a
// script with a spread function takes it on every version (on 7.0 and later its shebang allows
// keys of many slots; an older server checks only that the node serves each key).
REDLIMIT_INLINE std::vector<std::string> eval_call(std::string verb, std::string_view body, const ScriptCall& call) {
  if (!call.spread || call.keys.empty()) return eval_like(std::move(verb), body, call.keys, call.args);
  return spread_like(std::move(verb), body, call, "spread");
}

}  // namespace script_impl

REDLIMIT_INLINE std::vector<std::string> evalsha_command(const Script& script, const std::vector<std::string>& keys,
                                                         const std::vector<std::string>& args, bool before_7) {
  return script_impl::eval_like("EVALSHA", before_7 ? script.legacy_sha1 : script.sha1, keys, args);
}

REDLIMIT_INLINE std::vector<std::string> evalsha_call_command(const Script& script, const ScriptCall& call,
                                                              bool before_7) {
  return script_impl::eval_call("EVALSHA", before_7 ? script.legacy_sha1 : script.sha1, call);
}

REDLIMIT_INLINE std::vector<std::string> eval_call_command(const Script& script, const ScriptCall& call,
                                                           bool before_7) {
  return script_impl::eval_call("EVAL", before_7 ? script.legacy_source : script.source, call);
}

REDLIMIT_INLINE std::vector<std::string> fcall_command(const Script& script, const ScriptCall& call) {
  if (!call.spread || call.keys.empty()) return script_impl::eval_like("FCALL", script.function, call.keys, call.args);
  return script_impl::spread_like("FCALL", script.spread_function, call, {});
}

REDLIMIT_INLINE bool is_shebang_refused(const Reply& r) {
  // Redis 6: "ERR Error compiling script (new function): user_script:1: unexpected symbol near '#'"
  return r.is_error() && r.str.rfind("ERR Error compiling script", 0) == 0 &&
         r.str.find("user_script:1:") != std::string::npos && r.str.find("near '#'") != std::string::npos;
}

REDLIMIT_INLINE bool is_noscript(const Reply& r) { return r.is_error() && r.str.rfind("NOSCRIPT", 0) == 0; }

REDLIMIT_INLINE bool is_function_missing(const Reply& r) {
  return r.is_error() && r.str.rfind("ERR Function not found", 0) == 0;
}

namespace script_impl {
// Only FCALL is sent with this question: an unknown command is FCALL, a server older than Redis 7.0.
REDLIMIT_INLINE bool is_fcall_unknown(const Reply& r) {
  return r.is_error() && r.str.rfind("ERR unknown command", 0) == 0;
}
}  // namespace script_impl

REDLIMIT_INLINE bool is_fcall_refused(const Reply& r) {
  if (!r.is_error()) return false;
  // An unknown command (script_impl::is_fcall_unknown). NOPERM names the command when the user may
  // not run it ("... to run the 'fcall' command"), and the keys when it may not touch them, which
  // EVALSHA meets as well and which stays an outage.
  if (script_impl::is_fcall_unknown(r)) return true;
  return r.str.rfind("NOPERM", 0) == 0 && r.str.find("'fcall'") != std::string::npos;
}

REDLIMIT_INLINE bool is_outage_reply(std::string_view error) {
  // By the reply's first word (Redis's error code). None of these replies comes from a script that
  // ran: the server refused the command before running it.
  static constexpr std::string_view kOutages[] = {
      "LOADING",      // the dataset is still loading (restart, full resync)
      "BUSY",         // another script or function is running past its time limit
      "MASTERDOWN",   // a replica that lost its master and serves no stale data
      "CLUSTERDOWN",  // the cluster cannot serve this slot
      "TRYAGAIN",     // a cluster slot mid-migration
      "READONLY",     // a replica (after a failover, or a misrouted connection)
      "OOM",          // maxmemory reached under noeviction
      "NOREPLICAS",   // min-replicas-to-write not met
      "MISCONF",      // writes stopped after a failed RDB save
      "NOPERM",       // the ACL user may not run EVALSHA/EVAL (or lost access to the keys)
      "NOAUTH",       // the server now requires a password this connection did not send
      // A cluster redirect the router could not follow to the end within the call (redirects
      // exhausted: the slot moving back and forth, a map that keeps changing). Not a script error:
      // the command did not run anywhere.
      "MOVED",
      "ASK",
  };
  const std::string_view code = error.substr(0, error.find(' '));
  for (std::string_view outage : kOutages) {
    if (code == outage) return true;
  }
  // Generic "ERR" replies that still mean the server refuses everyone, not this request.
  return code == "ERR" && error.find("max number of clients reached") != std::string_view::npos;
}

REDLIMIT_INLINE void check_script_reply(const Script& script, const Reply& reply, std::string_view who) {
  if (!reply.is_error()) return;
  const std::string name = who.empty() ? message("script {}", script.name) : std::string(who);
  // A command of a pipeline whose node failed in transit (Connection::pipeline): an outage of this
  // call only, with the outcome unknown, as if it had been thrown.
  const std::string_view text = reply.str;
  const std::string_view code = text.substr(0, text.find(' '));
  const std::string_view rest = code.size() < text.size() ? text.substr(code.size() + 1) : std::string_view{};
  if (code == kTransitTimeout) throw TimeoutError(message("{}: {}", name, rest));
  if (code == kTransitConnectionError) throw ConnectionError(message("{}: {}", name, rest));
  if (is_outage_reply(reply.str)) throw UnavailableError(message("{}: {}", name, printable(reply.str)));
  throw ReplyError(message("{} failed: {}", name, printable(reply.str)));
}

}  // namespace redlimit::detail

#pragma once
// Bodies of redlimit/detail/script.hpp, second part: the rules that settle a connection's script
// path, and the synchronous send step (the commands and the reply classes:
// script_commands-inl.hpp; the asynchronous send step: script_async-inl.hpp).
#include "redlimit/detail/message.hpp"
#include "redlimit/detail/script.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/impl/script_commands-inl.hpp"

namespace redlimit::detail {

namespace scripts {  // redlimit/detail/scripts.hpp, which includes this file's header
REDLIMIT_INLINE std::string_view library();
REDLIMIT_INLINE std::string_view library_name();
}  // namespace scripts

namespace script_impl {

// Commands command(0) .. command(n - 1) in one round trip: one alone (every single consume) as
// one command, without a list of one to hold it; several as a pipeline.
template <class Command>
std::vector<Reply> round_trip(Connection& conn, std::size_t n, Command command) {
  std::vector<Reply> replies;
  if (n == 1) {
    replies.push_back(conn.command(command(0)));
    return replies;
  }
  std::vector<std::vector<std::string>> commands;
  commands.reserve(n);
  for (std::size_t i = 0; i < n; ++i) commands.push_back(command(i));
  return conn.pipeline(commands);
}

// Puts the replies of a second round trip, `resend()`, in place of those of the calls at `again`
// (in order). When that round trip breaks, it is thrown if it carried every call of the batch;
// otherwise the calls answered the first time keep their decisions (a cluster: other nodes had
// the script) and only the re-sent ones get the failure (transit_failure: outcome unknown).
template <class Resend>
void replace_resent(std::vector<Reply>& replies, const std::vector<std::size_t>& again, Resend resend) {
  std::vector<Reply> second;
  try {
    second = resend();
  } catch (const ConnectionError& e) {
    if (again.size() == replies.size()) throw;
    for (std::size_t i : again) replies[i] = transit_failure(e);
    return;
  }
  for (std::size_t j = 0; j < again.size(); ++j) replies[again[j]] = std::move(second[j]);
}

// Sends the calls at `again` once more with `send(subset)` (one step of the send path over those
// calls alone), their replies in place of the first ones (replace_resent).
template <class Send>
void send_again(std::vector<Reply>& replies, const std::vector<std::size_t>& again, const std::vector<ScriptCall>& calls,
                Send send) {
  std::vector<ScriptCall> subset;
  subset.reserve(again.size());
  for (std::size_t i : again) subset.push_back(calls[i]);
  replace_resent(replies, again, [&] { return send(subset); });
}

// The positions of the replies that `did_not_run` picks: the calls a step sends again.
template <class Pred>
std::vector<std::size_t> positions_of(const std::vector<Reply>& replies, Pred did_not_run) {
  std::vector<std::size_t> positions;
  for (std::size_t i = 0; i < replies.size(); ++i) {
    if (did_not_run(replies[i])) positions.push_back(i);
  }
  return positions;
}

// Both reload steps (Functions, EVALSHA): the calls at `again` sent once more, in one round trip
// behind `load` (FUNCTION LOAD, SCRIPT LOAD), `command(i)` making call i's command, so that the
// code travels once for all of them. `settle(load_reply, resent_replies)` reads that round trip
// before the re-sent replies go in place (replace_resent: a broken round trip settles nothing).
template <class Command, class Settle>
void resend_behind_load(Connection& conn, std::vector<Reply>& replies, const std::vector<std::size_t>& again,
                        std::vector<std::string> load, Command command, Settle settle) {
  std::vector<std::vector<std::string>> commands{std::move(load)};
  commands.reserve(again.size() + 1);
  for (std::size_t i : again) commands.push_back(command(i));
  replace_resent(replies, again, [&] {
    std::vector<Reply> second = conn.pipeline(commands);
    Reply load_reply = std::move(second.front());
    second.erase(second.begin());
    settle(load_reply, second);
    return second;
  });
}

}  // namespace script_impl

namespace script_impl {

REDLIMIT_INLINE std::vector<std::string> function_load_command() {
  return {"FUNCTION", "LOAD", std::string(scripts::library())};
}

REDLIMIT_INLINE std::vector<std::string> script_load_command(const Script& script, bool before_7) {
  return {"SCRIPT", "LOAD", std::string(before_7 ? script.legacy_source : script.source)};
}

// Whether a FUNCTION LOAD reply leaves the library on the server: loaded now, or already there
// (another client, another connection, an earlier process of this version).
REDLIMIT_INLINE bool library_present(const Reply& load) {
  return !load.is_error() || load.str.find("already exists") != std::string::npos;
}

// Whether an error reply is about the moment, not about what the server has: an outage reply
// (LOADING, BUSY, OOM, ...) or a cluster master that failed in transit. It settles no script path.
REDLIMIT_INLINE bool is_momentary(const Reply& r) { return is_outage_reply(r.str) || is_transit_failure(r); }

// What a FUNCTION LOAD reply settles: the library is there (loaded, or already there), so
// functions; the connection will not get it there (its ACL user may not load it, the server has no
// FUNCTION command), so evalsha for good; a momentary reply settles nothing, and the next call tries
// FCALL again. NOPERM is an outage reply to a decision, but to a LOAD it is a refusal.
REDLIMIT_INLINE void settle_after_load(ScriptPathState& path, const Reply& load) {
  if (library_present(load)) {
    path.set(ScriptPath::functions);
  } else if (load.str.rfind("NOPERM", 0) == 0 || !is_momentary(load)) {
    path.set(ScriptPath::evalsha);
  }
}

// Whether an FCALL reply shows that the function ran: a decision, or an error the script raised.
// Then the server has Functions and this library. Replies that show nothing either way (missing,
// refused, momentary) leave a probing connection probing.
REDLIMIT_INLINE bool fcall_ran(const Reply& r) {
  return !r.is_error() || (!is_function_missing(r) && !is_fcall_refused(r) && !is_momentary(r));
}

// A refused FCALL (is_fcall_refused) moves the connection to evalsha for good; an unknown command
// (not an ACL's refusal) also says the server predates Redis 7.0, which added both FCALL and the
// scripts' shebang line.
REDLIMIT_INLINE void settle_refused(ScriptPathState& path, const Reply& refused) {
  if (is_fcall_unknown(refused)) path.set_server_before_7();
  path.set(ScriptPath::evalsha);
}

// Settles a connection's ScriptPath from a round trip of FCALLs: a refused FCALL moves it to
// evalsha for good, and one that ran settles a probing connection on functions. "Function not
// found" settles nothing here: the reload that follows does (reload_missing).
REDLIMIT_INLINE void settle_path(ScriptPathState& path, const std::vector<Reply>& fcalls) {
  bool ran = false;
  for (const Reply& r : fcalls) {
    if (is_fcall_refused(r)) {
      settle_refused(path, r);
      return;
    }
    ran = ran || fcall_ran(r);
  }
  if (ran && path.get() == ScriptPath::probe) path.set(ScriptPath::functions);
}

// Re-sends, in one round trip behind a FUNCTION LOAD, the FCALLs of `calls` that met "Function
// not found": on a fresh server (the first calls of a probing connection), or one that lost the
// library (FUNCTION FLUSH, a new master). Their replies replace the missing ones. The LOAD's reply
// settles the connection: the library is there (loaded now, or by someone else meanwhile), so
// functions; or it could not be loaded (an ACL user who may call but not load), so evalsha, and
// what still misses goes on to EVALSHA. A broken round trip settles nothing; it is thrown when it
// carried every call of the batch, and is otherwise the outcome of the re-sent calls only.
REDLIMIT_INLINE void reload_missing(Connection& conn, ScriptPathState& path, const Script& script,
                                    const std::vector<ScriptCall>& calls, std::vector<Reply>& replies) {
  const std::vector<std::size_t> missing = positions_of(replies, is_function_missing);
  if (missing.empty()) return;
  resend_behind_load(
      conn, replies, missing, function_load_command(), [&](std::size_t i) { return fcall_command(script, calls[i]); },
      [&](const Reply& load, const std::vector<Reply>& fcalls) {
        settle_after_load(path, load);
        settle_path(path, fcalls);  // a master that had the LOAD ran its FCALLs
      });
}

// The Functions step: every call as FCALL in one round trip, FCALL first even while the connection
// probes. The library is data on the server, so most connections find it there (another process,
// an earlier run, a replica promoted), and sending its 160 KB with each new connection's first call
// would cost more than the second round trip a fresh server takes once. Returns one reply per call;
// those that did not run (missing after the reload, refused) are left for the EVALSHA step.
REDLIMIT_INLINE std::vector<Reply> fcall_calls(Connection& conn, ScriptPathState& path, const Script& script,
                                               const std::vector<ScriptCall>& calls) {
  std::vector<Reply> replies =
      round_trip(conn, calls.size(), [&](std::size_t i) { return fcall_command(script, calls[i]); });
  settle_path(path, replies);
  if (path.get() != ScriptPath::evalsha) reload_missing(conn, path, script, calls, replies);
  return replies;
}

// The EVALSHA step: every call as EVALSHA in one round trip. Those that met NOSCRIPT (a server
// restarted, a replica promoted, SCRIPT FLUSH) go again behind one SCRIPT LOAD, in one round trip:
// the script's body is sent once for all of them, where an EVAL each would send it once per call (a
// batch of many slots on a cluster, a batch past 256 requests in chunks; on a cluster the router
// sends the LOAD to every master, ahead of its share). A call that meets NOSCRIPT again (the LOAD
// refused, as to an ACL user who may run scripts but not SCRIPT, or the cache flushed again
// meanwhile) goes as EVAL, which cannot meet it: three round trips at most, and only NOSCRIPT, a
// reply that says the script did not run, sends a call again. The script's text is its legacy
// one on a server older than Redis 7.0 (evalsha_calls, below).
REDLIMIT_INLINE std::vector<Reply> evalsha_sent(Connection& conn, const Script& script,
                                                const std::vector<ScriptCall>& calls, bool before_7) {
  std::vector<Reply> replies =
      round_trip(conn, calls.size(), [&](std::size_t i) { return evalsha_call_command(script, calls[i], before_7); });
  const std::vector<std::size_t> again = positions_of(replies, is_noscript);  // the calls that did not run
  if (again.empty()) return replies;
  // The LOAD's reply settles nothing: what matters is whether the EVALSHAs behind it ran.
  resend_behind_load(
      conn, replies, again, script_load_command(script, before_7),
      [&](std::size_t i) { return evalsha_call_command(script, calls[i], before_7); },
      [](const Reply&, const std::vector<Reply>&) {});
  std::vector<std::size_t> still;  // the calls that did not run behind the LOAD either
  for (std::size_t i : again) {
    if (is_noscript(replies[i])) still.push_back(i);
  }
  if (still.empty()) return replies;
  replace_resent(replies, still, [&] {
    return round_trip(conn, still.size(),
                      [&](std::size_t j) { return eval_call_command(script, calls[still[j]], before_7); });
  });
  return replies;
}

// evalsha_sent() with the text the connection's server takes. A server that refuses to compile the
// script for its shebang line (Redis < 7.0, met with Options::redis_functions off: no FCALL said so
// first) ran none of those calls: the connection learns it for good, and they go once more as the
// legacy text, which cannot meet that refusal.
REDLIMIT_INLINE std::vector<Reply> evalsha_calls(Connection& conn, const Script& script,
                                                 const std::vector<ScriptCall>& calls) {
  ScriptPathState& path = conn.script_path_state();
  if (path.server_before_7()) return evalsha_sent(conn, script, calls, true);
  std::vector<Reply> replies = evalsha_sent(conn, script, calls, false);
  const std::vector<std::size_t> refused = positions_of(replies, is_shebang_refused);
  if (refused.empty()) return replies;
  path.set_server_before_7();
  send_again(replies, refused, calls, [&](const std::vector<ScriptCall>& again) {
    return evalsha_sent(conn, script, again, true);
  });
  return replies;
}

}  // namespace script_impl

REDLIMIT_INLINE std::vector<Reply> send_script_calls(Connection& conn, const Script& script,
                                                     const std::vector<ScriptCall>& calls) {
  if (script.function.empty() || conn.script_path() == ScriptPath::evalsha) {
    return script_impl::evalsha_calls(conn, script, calls);
  }
  std::vector<Reply> replies = script_impl::fcall_calls(conn, conn.script_path_state(), script, calls);
  const std::vector<std::size_t> rest = script_impl::positions_of(  // the calls that did not run as functions
      replies, [](const Reply& r) { return is_function_missing(r) || is_fcall_refused(r); });
  if (rest.empty()) return replies;
  script_impl::send_again(replies, rest, calls, [&](const std::vector<ScriptCall>& again) {
    return script_impl::evalsha_calls(conn, script, again);
  });
  return replies;
}

REDLIMIT_INLINE Reply run_script(Connection& conn, const Script& script, const std::vector<std::string>& keys,
                                 const std::vector<std::string>& args) {
  std::vector<ScriptCall> calls(1);
  calls[0].keys = keys;
  calls[0].args = args;
  Reply reply = std::move(send_script_calls(conn, script, calls).front());
  check_script_reply(script, reply);
  return reply;
}

}  // namespace redlimit::detail

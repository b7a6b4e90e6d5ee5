#pragma once
// Bodies of redlimit/detail/script.hpp, the asynchronous send step (send_script_call_async): one
// call over an AsyncConnection, with NOSCRIPT and "Function not found" handled once per connection
// for every call in flight. The commands, the reply classes and the rules that settle a
// connection's script path are the synchronous step's, in script-inl.hpp.
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <utility>

#include "redlimit/impl/script-inl.hpp"

namespace redlimit::detail {

namespace script_impl {

// One async script call, shared by its sends (the EVALSHA, the one after a reload, the EVAL).
struct AsyncScriptCall {
  std::shared_ptr<AsyncConnection> conn;
  const Script* script = nullptr;
  ScriptCall call;
  // Taken once, when the call starts: every send of the call carries it, so a reload after NOSCRIPT
  // gets what is left of the call's time, not a deadline of its own (docs/reliability.md §7).
  AsyncConnection::Deadline deadline{};
  std::function<void(Reply)> on_reply;
  std::function<void(std::exception_ptr)> on_error;
};

// Sends SCRIPT LOAD unless one is already on its way on this connection. A command queued after it
// runs after it (one ordered connection), so an EVALSHA queued now finds the script. A LOAD that
// cannot be queued, or fails, is not an error of the call: its EVALSHA meets NOSCRIPT once more and
// falls back to EVAL. The LOAD serves every call waiting for it, so it is no call's and keeps a
// deadline of its own (command_async); a call whose deadline passes first still ends then.
REDLIMIT_INLINE void load_script_async(const std::shared_ptr<AsyncConnection>& conn, const Script& script,
                                       bool before_7) {
  const std::string& sha1 = before_7 ? script.legacy_sha1 : script.sha1;
  if (!conn->begin_script_load(sha1)) return;
  auto done = [conn, sha1] { conn->end_script_load(sha1); };
  try {
    // A LOAD refused for the shebang line (a server older than 7.0, not yet known as one) teaches
    // the connection before the EVALSHAs queued behind it answer: they go again with the legacy
    // text (evalsha_async), not as thousands of EVALs of a text that cannot compile.
    conn->command_async(
        script_load_command(script, before_7),
        [done, conn](const Reply& r) {
          if (is_shebang_refused(r)) conn->script_path_state().set_server_before_7();
          done();
        },
        [done](const std::exception_ptr&) { done(); });
  } catch (...) {
    done();
  }
}

REDLIMIT_INLINE void evalsha_async(const std::shared_ptr<AsyncScriptCall>& c, bool after_reload);

// The last send of evalsha_async() below, EVAL, which cannot meet NOSCRIPT. Its text, the call's
// first (`before_7`: the legacy one), may meet a server older than Redis 7.0 that refuses its
// shebang line: then the call starts again with the legacy text.
REDLIMIT_INLINE void eval_async(const std::shared_ptr<AsyncScriptCall>& c, bool before_7) {
  auto on_reply = [c, before_7](Reply reply) {
    if (before_7 || !is_shebang_refused(reply)) {
      c->on_reply(std::move(reply));
      return;
    }
    try {
      c->conn->script_path_state().set_server_before_7();
      evalsha_async(c, false);
    } catch (...) {  // the next send was refused: nothing of this call is queued any more
      c->on_error(std::current_exception());
    }
  };
  c->conn->command_async_until(eval_call_command(*c->script, c->call, before_7), std::move(on_reply), c->on_error,
                               c->deadline);
}

// EVALSHA; on NOSCRIPT the first time, a reload and EVALSHA again; on NOSCRIPT the second time (the
// script was flushed again meanwhile, or the LOAD failed), EVAL, which cannot meet NOSCRIPT: every
// call ends after three sends at most. The text is the legacy one on a server older than Redis 7.0.
// Such a server, not yet known as one, refuses to compile the shebang line at the LOAD or the EVAL
// (an EVALSHA answers NOSCRIPT or runs): load_script_async and eval_async learn it there.
REDLIMIT_INLINE void evalsha_async(const std::shared_ptr<AsyncScriptCall>& c, bool after_reload) {
  const bool before_7 = c->conn->script_path_state().server_before_7();
  auto on_reply = [c, after_reload, before_7](Reply reply) {
    if (!is_noscript(reply)) {
      c->on_reply(std::move(reply));
      return;
    }
    try {
      // Read again: a call of the same storm may have learned meanwhile that the server predates
      // 7.0, and every step after that sends the legacy text.
      const bool now_before_7 = c->conn->script_path_state().server_before_7();
      if (!after_reload || now_before_7 != before_7) {
        load_script_async(c->conn, *c->script, now_before_7);
        evalsha_async(c, true);
      } else {
        eval_async(c, before_7);
      }
    } catch (...) {  // the next send was refused: nothing of this call is queued any more
      c->on_error(std::current_exception());
    }
  };
  c->conn->command_async_until(evalsha_call_command(*c->script, c->call, before_7), std::move(on_reply), c->on_error,
                               c->deadline);
}

// Sends the library's FUNCTION LOAD unless one is on its way on this connection (the same
// bookkeeping as SCRIPT LOAD, under the library's name); its reply settles the connection's path.
REDLIMIT_INLINE void load_library_async(const std::shared_ptr<AsyncConnection>& conn) {
  const std::string name(scripts::library_name());
  if (!conn->begin_script_load(name)) return;
  auto on_reply = [conn, name](const Reply& load) {
    settle_after_load(conn->script_path_state(), load);
    conn->end_script_load(name);
  };
  try {
    conn->command_async(function_load_command(), on_reply,
                        [conn, name](const std::exception_ptr&) { conn->end_script_load(name); });
  } catch (...) {
    conn->end_script_load(name);
  }
}

// FCALL; on "Function not found" the first time, a LOAD (one per connection, serving every call
// that meets it meanwhile) and FCALL again behind it; a second miss, or an FCALL the server refuses,
// goes on to the EVALSHA step (evalsha_async), whose own three sends at most end the call.
REDLIMIT_INLINE void fcall_async(const std::shared_ptr<AsyncScriptCall>& c, bool after_load) {
  auto on_reply = [c, after_load](Reply reply) {
    const bool refused = is_fcall_refused(reply);
    if (!refused && !is_function_missing(reply)) {
      if (c->conn->script_path() == ScriptPath::probe && fcall_ran(reply)) {
        c->conn->set_script_path(ScriptPath::functions);
      }
      c->on_reply(std::move(reply));
      return;
    }
    try {
      if (refused) settle_refused(c->conn->script_path_state(), reply);
      if (refused || after_load) {
        evalsha_async(c, false);
      } else {
        load_library_async(c->conn);
        fcall_async(c, true);
      }
    } catch (...) {  // the next send was refused: nothing of this call is queued any more
      c->on_error(std::current_exception());
    }
  };
  c->conn->command_async_until(fcall_command(*c->script, c->call), std::move(on_reply), c->on_error, c->deadline);
}

}  // namespace script_impl

REDLIMIT_INLINE void send_script_call_async(const std::shared_ptr<AsyncConnection>& conn, const Script& script,
                                            const ScriptCall& call, std::function<void(Reply)> on_reply,
                                            std::function<void(std::exception_ptr)> on_error,
                                            std::optional<AsyncConnection::Deadline> deadline) {
  auto c = std::make_shared<script_impl::AsyncScriptCall>();
  c->conn = conn;
  c->deadline = deadline ? *deadline : conn->call_deadline();
  c->script = &script;
  c->call = call;
  c->on_reply = std::move(on_reply);
  c->on_error = std::move(on_error);
  if (script.function.empty() || conn->script_path() == ScriptPath::evalsha) {
    script_impl::evalsha_async(c, false);
  } else {
    script_impl::fcall_async(c, false);
  }
}

}  // namespace redlimit::detail

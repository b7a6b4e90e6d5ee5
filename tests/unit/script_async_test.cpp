// send_script_call_async (issue 18, item 4): NOSCRIPT is handled once per connection. The first call
// to meet it queues one SCRIPT LOAD and sends its EVALSHA again behind it; calls meeting NOSCRIPT
// while that LOAD is on its way only send EVALSHA again; a second NOSCRIPT falls back to EVAL; every
// call ends in exactly one callback.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "redlimit/detail/script.hpp"
#include "redlimit/errors.hpp"
#include "unit/hand_answered.hpp"

namespace {

using redlimit::Reply;
using redlimit_test::HandAnswered;
using redlimit::detail::Script;
using redlimit::detail::ScriptCall;

const Reply kNoscript = Reply::make_error("NOSCRIPT No matching script. Please use EVAL.");

struct ScriptOutcome {
  int replies = 0;
  int errors = 0;
  Reply last;
};

class ScriptAsync : public ::testing::Test {
 protected:
  void send(ScriptOutcome& o) {
    ScriptCall call;
    call.keys = {"k"};
    call.args = {"1"};
    redlimit::detail::send_script_call_async(
        conn, script, call,
        [&o](Reply r) {
          ++o.replies;
          o.last = std::move(r);
        },
        [&o](std::exception_ptr) { ++o.errors; });
  }

  // A command a test leaves unanswered keeps its callbacks, and they hold the connection (the call's
  // state and the LOAD's bookkeeping both point back at it): a cycle that a real connection breaks
  // by ending every command with one callback. Dropping them here keeps LeakSanitizer quiet.
  void TearDown() override { conn->sent.clear(); }

  Script script{"t", "return 1"};
  std::shared_ptr<HandAnswered> conn = std::make_shared<HandAnswered>();
};

TEST_F(ScriptAsync, ManyCallsMeetingNoscriptShareOneLoad) {
  std::vector<ScriptOutcome> out(3);
  for (auto& o : out) send(o);
  // All three EVALSHAs were pipelined before the flush was noticed.
  EXPECT_EQ(conn->answer(kNoscript), "EVALSHA");  // queues SCRIPT LOAD + EVALSHA
  EXPECT_EQ(conn->answer(kNoscript), "EVALSHA");  // LOAD on its way: EVALSHA only
  EXPECT_EQ(conn->answer(kNoscript), "EVALSHA");
  ASSERT_EQ(conn->sent.size(), 4u);
  EXPECT_EQ(conn->sent[0].argv[0], "SCRIPT");
  EXPECT_EQ(conn->sent[0].argv[2], "return 1");
  EXPECT_EQ(conn->answer(Reply::make_string(script.sha1)), "SCRIPT LOAD");
  for (int i = 0; i < 3; ++i) EXPECT_EQ(conn->answer(Reply::make_integer(i)), "EVALSHA");
  EXPECT_TRUE(conn->sent.empty());
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(out[i].replies, 1);
    EXPECT_EQ(out[i].errors, 0);
    EXPECT_EQ(out[i].last.integer, i);
  }
  EXPECT_EQ(conn->total, 3 + 1 + 3);
  // The LOAD is answered: a later NOSCRIPT (another flush) reloads again.
  ScriptOutcome later;
  send(later);
  conn->answer(kNoscript);
  EXPECT_EQ(conn->sent.front().argv[0], "SCRIPT");
}

TEST_F(ScriptAsync, ASecondNoscriptFallsBackToEval) {
  ScriptOutcome o;
  send(o);
  conn->answer(kNoscript);
  conn->answer(Reply::make_string(script.sha1));  // SCRIPT LOAD
  EXPECT_EQ(conn->answer(kNoscript), "EVALSHA");   // flushed again meanwhile
  ASSERT_EQ(conn->sent.size(), 1u);
  EXPECT_EQ(conn->sent.front().argv[0], "EVAL");
  EXPECT_EQ(conn->answer(Reply::make_integer(7)), "EVAL");
  EXPECT_EQ(o.replies, 1);
  EXPECT_EQ(o.last.integer, 7);
  EXPECT_EQ(o.errors, 0);
}

// A server older than 7.0, met on the EVALSHA path of a connection that did not know it: its
// SCRIPT LOAD refuses the `#!lua` line, which teaches the connection before the EVALSHAs behind the
// LOAD come back; each then goes once more with the text without that line, behind one LOAD of it.
// No call sends a whole script as EVAL.
TEST_F(ScriptAsync, AShebangRefusedByTheLoadSendsTheLegacyTextBehindOneLoadOfIt) {
  script = Script{"t", "#!lua\nreturn 1"};
  const Reply refused =
      Reply::make_error("ERR Error compiling script (new function): user_script:1: unexpected symbol near '#'");
  std::vector<ScriptOutcome> out(2);
  for (auto& o : out) send(o);
  EXPECT_EQ(conn->answer(kNoscript), "EVALSHA");  // queues SCRIPT LOAD (with the shebang) + EVALSHA
  EXPECT_EQ(conn->answer(kNoscript), "EVALSHA");
  EXPECT_EQ(conn->sent.front().argv[2], "#!lua\nreturn 1");
  EXPECT_EQ(conn->answer(refused), "SCRIPT LOAD");
  EXPECT_TRUE(conn->script_path_state().server_before_7());
  EXPECT_EQ(conn->answer(kNoscript), "EVALSHA");  // now: one LOAD of the legacy text, EVALSHA of it
  EXPECT_EQ(conn->answer(kNoscript), "EVALSHA");
  ASSERT_EQ(conn->sent.size(), 3u);
  EXPECT_EQ(conn->sent[0].argv[0], "SCRIPT");
  EXPECT_EQ(conn->sent[0].argv[2], "return 1");
  EXPECT_EQ(conn->sent[1].argv[1], script.legacy_sha1);
  EXPECT_EQ(conn->answer(Reply::make_string(script.legacy_sha1)), "SCRIPT LOAD");
  EXPECT_EQ(conn->answer(Reply::make_integer(1)), "EVALSHA");
  EXPECT_EQ(conn->answer(Reply::make_integer(2)), "EVALSHA");
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(out[i].replies, 1);
    EXPECT_EQ(out[i].errors, 0);
    EXPECT_EQ(out[i].last.integer, i + 1);
  }
  ScriptOutcome later;  // and from then on, the legacy text at once
  send(later);
  EXPECT_EQ(conn->sent.front().argv[1], script.legacy_sha1);
  conn->answer(Reply::make_integer(3));
  EXPECT_EQ(later.last.integer, 3);
}

// The same refusal met by the EVAL that ends a call (its LOAD was answered otherwise): the call
// starts again with the legacy text.
TEST_F(ScriptAsync, AShebangRefusedByTheEvalStartsTheCallAgainWithTheLegacyText) {
  script = Script{"t", "#!lua\nreturn 1"};
  const Reply refused =
      Reply::make_error("ERR Error compiling script (new function): user_script:1: unexpected symbol near '#'");
  ScriptOutcome o;
  send(o);
  conn->answer(kNoscript);
  conn->answer(Reply::make_string(script.sha1));  // a LOAD that says nothing of the sort
  EXPECT_EQ(conn->answer(kNoscript), "EVALSHA");
  EXPECT_EQ(conn->answer(refused), "EVAL");
  EXPECT_TRUE(conn->script_path_state().server_before_7());
  ASSERT_EQ(conn->sent.size(), 1u);
  EXPECT_EQ(conn->sent.front().argv[1], script.legacy_sha1);
  EXPECT_EQ(conn->answer(Reply::make_integer(5)), "EVALSHA");
  EXPECT_EQ(o.replies, 1);
  EXPECT_EQ(o.errors, 0);
  EXPECT_EQ(o.last.integer, 5);
}

TEST_F(ScriptAsync, ARefusedLoadIsNotTheCallsErrorAndNothingLoops) {
  conn->refuse = "SCRIPT";
  ScriptOutcome o;
  send(o);
  EXPECT_EQ(conn->answer(kNoscript), "EVALSHA");
  EXPECT_EQ(conn->answer(kNoscript), "EVALSHA");  // no LOAD went out
  EXPECT_EQ(conn->answer(Reply::make_integer(1)), "EVAL");
  EXPECT_EQ(o.replies, 1);
  EXPECT_EQ(o.errors, 0);
  // The refused LOAD is not "on its way": the next NOSCRIPT tries again.
  conn->refuse.clear();
  ScriptOutcome next;
  send(next);
  conn->answer(kNoscript);
  EXPECT_EQ(conn->sent.front().argv[0], "SCRIPT");
}

TEST_F(ScriptAsync, ARefusedResendEndsTheCallWithItsError) {
  ScriptOutcome o;
  send(o);
  conn->refuse = "EVALSHA";
  conn->answer(kNoscript);
  EXPECT_EQ(o.errors, 1);
  EXPECT_EQ(o.replies, 0);
}

TEST_F(ScriptAsync, AFailedLoadLetsTheNextNoscriptReloadAgain) {
  ScriptOutcome o;
  send(o);
  conn->answer(kNoscript);
  HandAnswered::Sent load = std::move(conn->sent.front());
  conn->sent.pop_front();
  load.on_error(std::make_exception_ptr(redlimit::ConnectionError("broken")));
  ScriptOutcome next;
  send(next);  // queued behind the re-sent EVALSHA
  conn->answer(kNoscript);  // the first call's second NOSCRIPT: EVAL
  conn->answer(kNoscript);  // the next call's first: a new LOAD
  ASSERT_EQ(conn->sent.size(), 3u);
  EXPECT_EQ(conn->sent[0].argv[0], "EVAL");
  EXPECT_EQ(conn->sent[1].argv[0], "SCRIPT");
  EXPECT_EQ(conn->sent[2].argv[0], "EVALSHA");
}

// One deadline per call (docs/reliability.md §7): taken once when the call starts, and carried by
// every send of it (the EVALSHA, the EVALSHA after the reload, the EVAL), however late they go out.
// The shared SCRIPT LOAD is no call's: it has a deadline of its own.
TEST_F(ScriptAsync, EverySendOfACallCarriesTheDeadlineTakenAtItsStart) {
  using Deadline = redlimit::AsyncConnection::Deadline;
  const Deadline first = Deadline{} + std::chrono::hours(1);
  const Deadline second = first + std::chrono::seconds(1);
  ScriptOutcome a, b;
  conn->next_deadline = first;
  send(a);
  conn->next_deadline = second;
  send(b);
  conn->next_deadline = second + std::chrono::seconds(1);  // what a send taking a new deadline would get
  conn->answer(kNoscript);                         // a: LOAD + EVALSHA
  conn->answer(kNoscript);                         // b: EVALSHA
  conn->answer(Reply::make_string(script.sha1));   // the LOAD
  conn->answer(kNoscript);                         // a, flushed again meanwhile: EVAL
  EXPECT_EQ(conn->answer(Reply::make_integer(2)), "EVALSHA");  // b
  EXPECT_EQ(conn->answer(Reply::make_integer(1)), "EVAL");     // a
  EXPECT_EQ(a.replies, 1);
  EXPECT_EQ(b.replies, 1);
  EXPECT_EQ(conn->deadlines_taken, 2) << "one deadline per call, not per send";
  const std::vector<std::pair<std::string, Deadline>> expected = {
      {"EVALSHA", first}, {"EVALSHA", second}, {"SCRIPT", Deadline{}},
      {"EVALSHA", first}, {"EVALSHA", second}, {"EVAL", first},
  };
  EXPECT_EQ(conn->deadlines, expected);
}

// The Functions path on an async connection that probes: FCALL first; "Function not found" queues one
// FUNCTION LOAD (serving every call that missed) and the FCALL again behind it; the LOAD's reply
// settles the connection, and a reply that says nothing about Functions (an outage) leaves it
// probing.
class ScriptAsyncFunctions : public ScriptAsync {
 protected:
  void SetUp() override {
    script = Script{"t", "return 1", "lib_t"};
    conn->set_script_path(redlimit::ScriptPath::probe);
  }
  static Reply missing() { return Reply::make_error("ERR Function not found"); }
};

TEST_F(ScriptAsyncFunctions, ARunningFcallSettlesAndAnOutageDoesNot) {
  ScriptOutcome a, b;
  send(a);
  send(b);
  EXPECT_EQ(conn->answer(Reply::make_error("LOADING Redis is loading the dataset in memory")), "FCALL");
  EXPECT_EQ(conn->script_path(), redlimit::ScriptPath::probe);
  EXPECT_EQ(conn->answer(Reply::make_integer(4)), "FCALL");
  EXPECT_EQ(conn->script_path(), redlimit::ScriptPath::functions);
  EXPECT_EQ(a.replies + b.replies, 2);
  EXPECT_EQ(b.last.integer, 4);
  EXPECT_EQ(conn->total, 2) << "no FUNCTION LOAD while the library is there";
}

TEST_F(ScriptAsyncFunctions, CallsThatMissTheLibraryShareOneLoad) {
  std::vector<ScriptOutcome> out(3);
  for (auto& o : out) send(o);
  EXPECT_EQ(conn->answer(missing()), "FCALL");  // queues FUNCTION LOAD + FCALL
  EXPECT_EQ(conn->answer(missing()), "FCALL");  // LOAD on its way: FCALL only
  EXPECT_EQ(conn->answer(missing()), "FCALL");
  ASSERT_EQ(conn->sent.size(), 4u);
  EXPECT_EQ(conn->sent[0].argv[0], "FUNCTION");
  EXPECT_EQ(conn->answer(Reply::make_string("lib")), "FUNCTION");
  EXPECT_EQ(conn->script_path(), redlimit::ScriptPath::functions);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(conn->answer(Reply::make_integer(i)), "FCALL");
  for (int i = 0; i < 3; ++i) EXPECT_EQ(out[i].last.integer, i);
  EXPECT_EQ(conn->total, 3 + 1 + 3);
}

TEST_F(ScriptAsyncFunctions, ALoadTheUserMayNotSendSettlesOnEvalshaAndAnOutageOnNothing) {
  ScriptOutcome a;
  send(a);
  conn->answer(missing());  // queues FUNCTION LOAD + FCALL; the LOAD meets OOM:
  conn->answer(Reply::make_error("OOM command not allowed when used memory > 'maxmemory'."));
  EXPECT_EQ(conn->script_path(), redlimit::ScriptPath::probe);
  EXPECT_EQ(conn->answer(missing()), "FCALL");  // a second miss: the EVALSHA step
  EXPECT_EQ(conn->answer(Reply::make_integer(1)), "EVALSHA");
  EXPECT_EQ(a.last.integer, 1);
  ScriptOutcome b;
  send(b);
  conn->answer(missing());
  conn->answer(Reply::make_error("NOPERM User u has no permissions to run the 'function|load' command"));
  EXPECT_EQ(conn->script_path(), redlimit::ScriptPath::evalsha);
  conn->answer(missing());
  EXPECT_EQ(conn->answer(Reply::make_integer(2)), "EVALSHA");
  EXPECT_EQ(b.last.integer, 2);
}

}  // namespace

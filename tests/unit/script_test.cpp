// run_script and send_script_calls: EVALSHA first; on NOSCRIPT one SCRIPT LOAD with the EVALSHAs
// that missed behind it, in one round trip; EVAL only for a call that misses again (the LOAD
// refused); other error replies throw ReplyError; transport errors propagate and are never replayed.
#include "redlimit/detail/script.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "redlimit/detail/scripts.hpp"
#include "redlimit/detail/sha1.hpp"
#include "redlimit/errors.hpp"
#include "unit/mock_connection.hpp"

namespace {

using redlimit::ConnectionError;
using redlimit::Reply;
using redlimit::ReplyError;
using redlimit::TimeoutError;
using redlimit::detail::evalsha_call_command;
using redlimit::detail::evalsha_command;
using redlimit::detail::is_noscript;
using redlimit::detail::run_script;
using redlimit::detail::Script;
using ::testing::_;
using ::testing::ElementsAre;
using ::testing::InSequence;
using ::testing::Return;
using ::testing::StrictMock;
using ::testing::Throw;
using Argv = std::vector<std::string>;
using namespace std::string_literals;

constexpr std::string_view kSource = "return redis.call('GET', KEYS[1])";

class ScriptTest : public ::testing::Test {
 protected:
  Script script{"get", kSource};
  StrictMock<MockConnection> conn;
  const Argv keys{"k1", "k2"};
  const Argv args{"a", "b", "c"};

  Argv evalsha() const { return {"EVALSHA", script.sha1, "2", "k1", "k2", "a", "b", "c"}; }
  Argv eval() const { return {"EVAL", std::string(kSource), "2", "k1", "k2", "a", "b", "c"}; }
  Argv script_load() const { return {"SCRIPT", "LOAD", std::string(kSource)}; }
  // What Redis answers a SCRIPT LOAD: the script's SHA1.
  Reply loaded() const { return Reply::make_string(script.sha1); }
};

TEST_F(ScriptTest, ScriptIsNamedBySha1OfItsSource) {
  EXPECT_EQ(script.name, "get");
  EXPECT_EQ(script.source, kSource);
  EXPECT_EQ(script.sha1, redlimit::detail::sha1_hex(kSource));
  EXPECT_EQ(Script("one", "return 1").sha1, "e0e1f9fabfc9d4800c877a703b823ac0578ff8db");
}

TEST_F(ScriptTest, EvalshaCommandLayout) {
  EXPECT_EQ(evalsha_command(script, keys, args), evalsha());
  EXPECT_THAT(evalsha_command(script, {}, {}), ElementsAre("EVALSHA", script.sha1, "0"));
  EXPECT_THAT(evalsha_command(script, {"only"}, {}), ElementsAre("EVALSHA", script.sha1, "1", "only"));
  EXPECT_THAT(evalsha_command(script, {}, {"x"}), ElementsAre("EVALSHA", script.sha1, "0", "x"));
}

// A spread call over EVALSHA or EVAL declares its first key alone, the rest after "spread" and
// their number (lua/spread_eval.lua), on every server version (the legacy text before 7.0, the
// shebang's allow-cross-slot-keys after); any other call declares every key.
TEST_F(ScriptTest, ASpreadCallDeclaresItsFirstKeyAloneOnEveryVersion) {
  redlimit::detail::ScriptCall call{keys, args, true};
  EXPECT_THAT(evalsha_call_command(script, call, true),
              ElementsAre("EVALSHA", script.legacy_sha1, "1", "k1", "spread", "2", "k1", "k2", "a", "b", "c"));
  EXPECT_THAT(redlimit::detail::eval_call_command(script, call, true),
              ElementsAre("EVAL", script.legacy_source, "1", "k1", "spread", "2", "k1", "k2", "a", "b", "c"));
  EXPECT_THAT(evalsha_call_command(script, call, false),
              ElementsAre("EVALSHA", script.sha1, "1", "k1", "spread", "2", "k1", "k2", "a", "b", "c"));
  EXPECT_THAT(redlimit::detail::eval_call_command(script, call, false),
              ElementsAre("EVAL", script.source, "1", "k1", "spread", "2", "k1", "k2", "a", "b", "c"));
  call.spread = false;
  EXPECT_THAT(evalsha_call_command(script, call, true),
              ElementsAre("EVALSHA", script.legacy_sha1, "2", "k1", "k2", "a", "b", "c"));
  EXPECT_EQ(evalsha_call_command(script, call, false), evalsha());
}

// The EVAL text of every script that takes spread calls allows keys of many slots on 7.0 and later
// (its shebang's flag), and a server older than 7.0 gets it without that line; the others keep a
// bare shebang, under which Redis refuses a second slot.
TEST_F(ScriptTest, TheEvalTextOfASpreadCapableScriptAllowsKeysOfManySlots) {
  const std::string_view flagged = "#!lua flags=allow-cross-slot-keys\n";
  int spread_capable = 0;
  namespace scripts = redlimit::detail::scripts;
  for (const Script* s : {&scripts::fixed_window(), &scripts::sliding_log(), &scripts::policy(),
                          &scripts::token_bucket(), &scripts::leaky_bucket(), &scripts::block()}) {
    SCOPED_TRACE(s->name);
    const bool spreads = !s->spread_function.empty();
    spread_capable += spreads;
    EXPECT_EQ(s->source.rfind(spreads ? flagged : "#!lua\n", 0), 0u);
    EXPECT_EQ(s->source.find("ARGV[1] == 'spread'") != std::string_view::npos, spreads);
    EXPECT_EQ(s->legacy_source, s->source.substr(s->source.find('\n') + 1));
    EXPECT_NE(s->legacy_source.rfind("#!", 0), 0u);
  }
  EXPECT_EQ(spread_capable, 5);  // all but block.lua, which decides nothing
}

TEST_F(ScriptTest, EvalshaCommandIsBinarySafe) {
  const std::string key = "k\0{}|:"s, arg = "\0\xff"s;
  const Argv cmd = evalsha_command(script, {key}, {arg});
  ASSERT_EQ(cmd.size(), 5u);
  EXPECT_EQ(cmd[3], key);
  EXPECT_EQ(cmd[4], arg);
}

TEST_F(ScriptTest, SendsEvalshaAndReturnsItsReply) {
  EXPECT_CALL(conn, command(evalsha())).WillOnce(Return(Reply::make_string("value")));
  const Reply r = run_script(conn, script, keys, args);
  EXPECT_EQ(r.type, Reply::Type::string);
  EXPECT_EQ(r.str, "value");
}

TEST_F(ScriptTest, NilAndArrayRepliesAreReturnedAsIs) {
  EXPECT_CALL(conn, command(evalsha()))
      .WillOnce(Return(Reply::make_nil()))
      .WillOnce(Return(redlimit_unit::decision_reply(1, 2, 3, 4, 5)));
  EXPECT_EQ(run_script(conn, script, keys, args).type, Reply::Type::nil);
  const Reply r = run_script(conn, script, keys, args);
  ASSERT_EQ(r.type, Reply::Type::array);
  ASSERT_EQ(r.elements.size(), 5u);
  EXPECT_EQ(r.elements[4].integer, 5);
}

TEST_F(ScriptTest, NoscriptSendsTheEvalshaAgainBehindOneScriptLoad) {
  InSequence seq;
  EXPECT_CALL(conn, command(evalsha())).WillOnce(Return(redlimit_unit::noscript_reply()));
  EXPECT_CALL(conn, pipeline(ElementsAre(script_load(), evalsha())));  // the default: one command() each
  EXPECT_CALL(conn, command(script_load())).WillOnce(Return(loaded()));
  EXPECT_CALL(conn, command(evalsha())).WillOnce(Return(Reply::make_integer(42)));
  EXPECT_CALL(conn, command(eval())).Times(0);
  const Reply r = run_script(conn, script, keys, args);
  EXPECT_EQ(r.type, Reply::Type::integer);
  EXPECT_EQ(r.integer, 42);
}

TEST_F(ScriptTest, NextCallStartsWithEvalshaAgain) {
  InSequence seq;
  EXPECT_CALL(conn, command(evalsha())).WillOnce(Return(redlimit_unit::noscript_reply()));
  EXPECT_CALL(conn, pipeline(ElementsAre(script_load(), evalsha())));  // the default: one command() each
  EXPECT_CALL(conn, command(script_load())).WillOnce(Return(loaded()));
  EXPECT_CALL(conn, command(evalsha()))
      .WillOnce(Return(Reply::make_integer(1)))
      .WillOnce(Return(Reply::make_integer(2)));
  EXPECT_EQ(run_script(conn, script, keys, args).integer, 1);
  EXPECT_EQ(run_script(conn, script, keys, args).integer, 2);
}

TEST_F(ScriptTest, ErrorFromTheEvalshaAfterTheLoadThrowsWithoutLooping) {
  InSequence seq;
  EXPECT_CALL(conn, command(evalsha())).WillOnce(Return(redlimit_unit::noscript_reply()));
  EXPECT_CALL(conn, pipeline(ElementsAre(script_load(), evalsha())));  // the default: one command() each
  EXPECT_CALL(conn, command(script_load())).WillOnce(Return(Reply::make_error("ERR Error compiling script")));
  EXPECT_CALL(conn, command(evalsha())).WillOnce(Return(Reply::make_error("ERR Error running script: boom")));
  EXPECT_CALL(conn, command(eval())).Times(0);
  EXPECT_THROW(run_script(conn, script, keys, args), ReplyError);
}

// An ACL user who may run scripts but not SCRIPT LOAD: the EVALSHA behind the refused LOAD misses
// again, and the call goes once as EVAL.
TEST_F(ScriptTest, ARefusedLoadFallsBackToEvalExactlyOnce) {
  InSequence seq;
  EXPECT_CALL(conn, command(evalsha())).WillOnce(Return(redlimit_unit::noscript_reply()));
  EXPECT_CALL(conn, pipeline(ElementsAre(script_load(), evalsha())));  // the default: one command() each
  EXPECT_CALL(conn, command(script_load()))
      .WillOnce(Return(Reply::make_error("NOPERM User u has no permissions to run the 'script|load' command")));
  EXPECT_CALL(conn, command(evalsha())).WillOnce(Return(redlimit_unit::noscript_reply()));
  EXPECT_CALL(conn, command(eval())).WillOnce(Return(Reply::make_integer(7)));
  EXPECT_EQ(run_script(conn, script, keys, args).integer, 7);
}

TEST_F(ScriptTest, NoscriptFromEvalIsNotRetriedAgain) {
  InSequence seq;
  EXPECT_CALL(conn, command(evalsha())).WillOnce(Return(redlimit_unit::noscript_reply()));
  EXPECT_CALL(conn, pipeline(ElementsAre(script_load(), evalsha())));  // the default: one command() each
  EXPECT_CALL(conn, command(script_load())).WillOnce(Return(loaded()));
  EXPECT_CALL(conn, command(evalsha())).WillOnce(Return(redlimit_unit::noscript_reply()));
  EXPECT_CALL(conn, command(eval())).WillOnce(Return(redlimit_unit::noscript_reply()));
  EXPECT_THROW(run_script(conn, script, keys, args), ReplyError);
}

// Calls that share a round trip (a cluster's per-slot calls, a batch's chunks): those that met
// NOSCRIPT go again behind one LOAD, in one round trip, and the others keep their replies.
TEST_F(ScriptTest, OneLoadServesEveryCallOfTheRoundTripThatMissed) {
  std::vector<redlimit::detail::ScriptCall> calls(3);
  for (std::size_t i = 0; i < calls.size(); ++i) calls[i].keys = {"k" + std::to_string(i)};
  const auto sha = [&](std::size_t i) { return evalsha_command(script, calls[i].keys, {}); };
  InSequence seq;
  EXPECT_CALL(conn, pipeline(ElementsAre(sha(0), sha(1), sha(2))))
      .WillOnce(Return(std::vector<Reply>{redlimit_unit::noscript_reply(), Reply::make_integer(1),
                                          redlimit_unit::noscript_reply()}));
  EXPECT_CALL(conn, pipeline(ElementsAre(script_load(), sha(0), sha(2))))
      .WillOnce(Return(std::vector<Reply>{loaded(), Reply::make_integer(0), Reply::make_integer(2)}));
  const std::vector<Reply> r = redlimit::detail::send_script_calls(conn, script, calls);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].integer, 0);
  EXPECT_EQ(r[1].integer, 1);
  EXPECT_EQ(r[2].integer, 2);
}

TEST_F(ScriptTest, OtherErrorRepliesThrowReplyErrorAndAreNotRetried) {
  for (const char* text : {"ERR Error running script (call to f_abc): @user_script:1: boom",
                           "BUSY Redis is busy running a script.",
                           "READONLY You can't write against a read only replica.",
                           "OOM command not allowed when used memory > 'maxmemory'.", "WRONGTYPE Operation",
                           "ERR unknown command 'EVALSHA'"}) {
    SCOPED_TRACE(text);
    EXPECT_CALL(conn, command(evalsha())).WillOnce(Return(Reply::make_error(text)));
    EXPECT_CALL(conn, command(eval())).Times(0);
    try {
      run_script(conn, script, keys, args);
      ADD_FAILURE() << "did not throw";
    } catch (const ReplyError& e) {
      // The server's words reach the caller.
      const std::string t = text;
      EXPECT_THAT(e.what(), ::testing::HasSubstr(t.substr(0, t.find(' '))));
    }
    ::testing::Mock::VerifyAndClearExpectations(&conn);
  }
}

TEST_F(ScriptTest, ServerCannotServeNowIsAnUnavailableError) {
  // UnavailableError is a ReplyError the failure policy treats like an outage: the script did not run.
  for (const char* text : {"LOADING Redis is loading the dataset in memory", "BUSY Redis is busy running a script.",
                           "MASTERDOWN Link with MASTER is down", "CLUSTERDOWN The cluster is down",
                           "TRYAGAIN Multiple keys request during rehashing of slot",
                           "READONLY You can't write against a read only replica.",
                           "OOM command not allowed when used memory > 'maxmemory'.",
                           "NOREPLICAS Not enough good replicas to write.",
                           "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist",
                           "NOPERM User u has no permissions to run the 'evalsha' command",
                           "NOAUTH Authentication required.", "ERR max number of clients reached",
                           // cluster redirects the router could not follow to the end
                           "MOVED 3999 127.0.0.1:6381", "ASK 3999 127.0.0.1:6381"}) {
    SCOPED_TRACE(text);
    EXPECT_CALL(conn, command(evalsha())).WillOnce(Return(Reply::make_error(text)));
    EXPECT_CALL(conn, command(eval())).Times(0);
    EXPECT_THROW(run_script(conn, script, keys, args), redlimit::UnavailableError);
    ::testing::Mock::VerifyAndClearExpectations(&conn);
  }
}

TEST_F(ScriptTest, ScriptErrorsAreNotUnavailableErrors) {
  // The first word decides: "BUSYKEY" is not "BUSY", and an ERR is a usage error unless it says the
  // server refuses every client.
  for (const char* text : {"ERR Error running script: @user_script:1: boom", "WRONGTYPE Operation against a key",
                           "BUSYKEY Target key name already exists.", "ERR unknown command 'EVALSHA'",
                           "ERR max number of keys"}) {
    SCOPED_TRACE(text);
    EXPECT_CALL(conn, command(evalsha())).WillOnce(Return(Reply::make_error(text)));
    bool unavailable = false, reply_error = false;
    try {
      run_script(conn, script, keys, args);
    } catch (const redlimit::UnavailableError&) {
      unavailable = true;
    } catch (const ReplyError&) {
      reply_error = true;
    }
    EXPECT_TRUE(reply_error);
    EXPECT_FALSE(unavailable);
    ::testing::Mock::VerifyAndClearExpectations(&conn);
  }
}

TEST_F(ScriptTest, NonErrorReplySayingNoscriptIsNotAFallbackTrigger) {
  // A script may legitimately return the string "NOSCRIPT"; only an error reply means "not cached".
  EXPECT_CALL(conn, command(evalsha())).WillOnce(Return(Reply::make_string("NOSCRIPT")));
  EXPECT_CALL(conn, command(eval())).Times(0);
  const Reply r = run_script(conn, script, keys, args);
  EXPECT_EQ(r.type, Reply::Type::string);
  EXPECT_EQ(r.str, "NOSCRIPT");
}

TEST_F(ScriptTest, ConnectionErrorPropagatesAndIsNotReplayed) {
  EXPECT_CALL(conn, command(evalsha())).WillOnce(Throw(ConnectionError("connection reset by peer")));
  EXPECT_CALL(conn, command(eval())).Times(0);
  EXPECT_THROW(run_script(conn, script, keys, args), ConnectionError);
}

TEST_F(ScriptTest, TimeoutPropagatesAndIsNotReplayed) {
  EXPECT_CALL(conn, command(evalsha())).WillOnce(Throw(TimeoutError("no reply within 1000 ms")));
  EXPECT_CALL(conn, command(eval())).Times(0);
  EXPECT_THROW(run_script(conn, script, keys, args), TimeoutError);
}

TEST_F(ScriptTest, ConnectionErrorDuringTheReloadPropagates) {
  InSequence seq;
  EXPECT_CALL(conn, command(evalsha())).WillOnce(Return(redlimit_unit::noscript_reply()));
  EXPECT_CALL(conn, pipeline(ElementsAre(script_load(), evalsha())));  // the default: one command() each
  EXPECT_CALL(conn, command(script_load())).WillOnce(Throw(ConnectionError("broken pipe")));
  EXPECT_CALL(conn, command(eval())).Times(0);
  EXPECT_THROW(run_script(conn, script, keys, args), ConnectionError);
}

TEST_F(ScriptTest, ConnectionErrorDuringEvalPropagates) {
  InSequence seq;
  EXPECT_CALL(conn, command(evalsha())).WillOnce(Return(redlimit_unit::noscript_reply()));
  EXPECT_CALL(conn, pipeline(ElementsAre(script_load(), evalsha())));  // the default: one command() each
  EXPECT_CALL(conn, command(script_load())).WillOnce(Return(Reply::make_error("NOPERM no")));
  EXPECT_CALL(conn, command(evalsha())).WillOnce(Return(redlimit_unit::noscript_reply()));
  EXPECT_CALL(conn, command(eval())).WillOnce(Throw(ConnectionError("broken pipe")));
  EXPECT_THROW(run_script(conn, script, keys, args), ConnectionError);
}

TEST(IsNoscriptTest, RecognisesOnlyNoscriptErrorReplies) {
  EXPECT_TRUE(is_noscript(Reply::make_error("NOSCRIPT No matching script. Please use EVAL.")));
  EXPECT_TRUE(is_noscript(Reply::make_error("NOSCRIPT")));
  EXPECT_FALSE(is_noscript(Reply::make_error("ERR unknown command")));
  EXPECT_FALSE(is_noscript(Reply::make_error("ERR user_script:1: NOSCRIPT in the middle")));
  EXPECT_FALSE(is_noscript(Reply::make_string("NOSCRIPT No matching script.")));
  EXPECT_FALSE(is_noscript(Reply::make_status("NOSCRIPT")));
  EXPECT_FALSE(is_noscript(Reply::make_nil()));
  EXPECT_FALSE(is_noscript(Reply::make_integer(0)));
}

}  // namespace

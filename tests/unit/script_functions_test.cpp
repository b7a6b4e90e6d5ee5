// The Functions path of send_script_calls (issue 13), against a mocked connection: what is sent
// while probing (FCALL first, the library only when it is missing), on a server without FCALL
// (Redis < 7.0: the scripts' text without its shebang line, integration_redis6 on a real one), for
// an ACL user denied it, after FUNCTION FLUSH,
// and that a broken round trip is never replayed. Real servers: tests/integration/functions_test.cpp.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "redlimit/detail/script.hpp"
#include "redlimit/detail/scripts.hpp"
#include "redlimit/detail/sha1.hpp"
#include "redlimit/errors.hpp"
#include "unit/mock_connection.hpp"

namespace {

using redlimit::Reply;
using redlimit::ScriptPath;
using redlimit::detail::ScriptCall;
using redlimit::detail::send_script_calls;
using ::testing::_;
using ::testing::ElementsAre;
using ::testing::InSequence;
using ::testing::Return;
using ::testing::StrictMock;
using ::testing::Throw;
using Argv = std::vector<std::string>;
using Commands = std::vector<Argv>;

class ScriptFunctionsTest : public ::testing::Test {
 protected:
  void SetUp() override { conn.set_script_path(ScriptPath::probe); }

  const redlimit::detail::Script& script = redlimit::detail::scripts::fixed_window();
  StrictMock<MockConnection> conn;
  std::vector<ScriptCall> calls{{{"k", "kb"}, {"1", "1", "1"}}};

  Argv load() const { return {"FUNCTION", "LOAD", std::string(redlimit::detail::scripts::library())}; }
  Argv fcall() const { return {"FCALL", std::string(script.function), "2", "k", "kb", "1", "1", "1"}; }
  Argv evalsha() const { return {"EVALSHA", script.sha1, "2", "k", "kb", "1", "1", "1"}; }
  Argv legacy_evalsha() const { return {"EVALSHA", script.legacy_sha1, "2", "k", "kb", "1", "1", "1"}; }
  static Reply ok() { return Reply::make_integer(7); }
  static Reply missing() { return Reply::make_error("ERR Function not found"); }
};

TEST_F(ScriptFunctionsTest, AProbingConnectionSendsFcallAloneAndSettlesWhenItRuns) {
  EXPECT_CALL(conn, command(fcall())).Times(2).WillRepeatedly(Return(ok()));
  EXPECT_EQ(send_script_calls(conn, script, calls).at(0).integer, 7);  // the library was there
  EXPECT_EQ(conn.script_path(), ScriptPath::functions);
  EXPECT_EQ(send_script_calls(conn, script, calls).at(0).integer, 7);
}

TEST_F(ScriptFunctionsTest, AFreshServerGetsTheLibraryOnceBehindWhichTheCallsRunAgain) {
  calls.push_back(calls.front());
  InSequence order;
  EXPECT_CALL(conn, pipeline(Commands{fcall(), fcall()})).WillOnce(Return(std::vector<Reply>{missing(), missing()}));
  EXPECT_CALL(conn, pipeline(Commands{load(), fcall(), fcall()}))
      .WillOnce(Return(
          std::vector<Reply>{Reply::make_string(std::string(redlimit::detail::scripts::library_name())), ok(), ok()}));
  const auto replies = send_script_calls(conn, script, calls);
  ASSERT_EQ(replies.size(), 2u);
  EXPECT_EQ(replies[0].integer, 7);
  EXPECT_EQ(replies[1].integer, 7);
  EXPECT_EQ(conn.script_path(), ScriptPath::functions);
}

TEST_F(ScriptFunctionsTest, ALibraryLoadedMeanwhileByAnotherClientSettlesToo) {
  InSequence order;
  EXPECT_CALL(conn, command(fcall())).WillOnce(Return(missing()));
  EXPECT_CALL(conn, pipeline(Commands{load(), fcall()}))
      .WillOnce(Return(std::vector<Reply>{Reply::make_error("ERR Library 'x' already exists"), ok()}));
  EXPECT_EQ(send_script_calls(conn, script, calls).at(0).integer, 7);
  EXPECT_EQ(conn.script_path(), ScriptPath::functions);
}

// FCALL unknown: a server older than 7.0, which cannot compile the scripts' `#!lua` line either:
// EVALSHA of the text without it, for good.
TEST_F(ScriptFunctionsTest, AServerWithoutFcallGoesToEvalshaOfTheLegacyTextForGood) {
  InSequence order;
  EXPECT_CALL(conn, command(fcall()))
      .WillOnce(Return(Reply::make_error("ERR unknown command `fcall`, with args beginning with: ")));
  EXPECT_CALL(conn, command(legacy_evalsha())).Times(2).WillRepeatedly(Return(ok()));
  EXPECT_EQ(send_script_calls(conn, script, calls).at(0).integer, 7);
  EXPECT_EQ(conn.script_path(), ScriptPath::evalsha);
  EXPECT_TRUE(conn.script_path_state().server_before_7());
  EXPECT_EQ(send_script_calls(conn, script, calls).at(0).integer, 7);
}

TEST_F(ScriptFunctionsTest, TheLegacyTextIsTheScriptWithoutItsShebangLine) {
  ASSERT_EQ(script.source.substr(0, 5), "#!lua");  // then, for a spread-capable script, its flags
  EXPECT_EQ(script.legacy_source, script.source.substr(script.source.find('\n') + 1));
  EXPECT_EQ(script.legacy_sha1, redlimit::detail::sha1_hex(script.legacy_source));
  EXPECT_NE(script.legacy_sha1, script.sha1);
  const redlimit::detail::Script plain{"p", "return 1"};  // no shebang: the same text
  EXPECT_EQ(plain.legacy_source, plain.source);
  EXPECT_EQ(plain.legacy_sha1, plain.sha1);
}

// Functions off (Options::redis_functions = false) on a server older than 7.0: nothing said so
// before the script met it. Its refusal to compile the shebang line ran nothing; the call goes
// again with the legacy text, and so does every later one.
TEST_F(ScriptFunctionsTest, AShebangRefusedOnTheEvalshaPathSendsTheLegacyTextForGood) {
  conn.set_script_path(ScriptPath::evalsha);
  const Reply refused =
      Reply::make_error("ERR Error compiling script (new function): user_script:1: unexpected symbol near '#'");
  const Reply noscript = Reply::make_error("NOSCRIPT No matching script. Please use EVAL.");
  const Argv args = {"2", "k", "kb", "1", "1", "1"};
  auto with = [&](Argv head) {
    head.insert(head.end(), args.begin(), args.end());
    return head;
  };
  InSequence order;
  EXPECT_CALL(conn, command(evalsha())).WillOnce(Return(noscript));
  EXPECT_CALL(conn, pipeline(Commands{{"SCRIPT", "LOAD", std::string(script.source)}, evalsha()}))
      .WillOnce(Return(std::vector<Reply>{refused, noscript}));
  EXPECT_CALL(conn, command(with({"EVAL", std::string(script.source)}))).WillOnce(Return(refused));
  EXPECT_CALL(conn, command(legacy_evalsha())).WillOnce(Return(noscript));
  EXPECT_CALL(conn, pipeline(Commands{{"SCRIPT", "LOAD", std::string(script.legacy_source)}, legacy_evalsha()}))
      .WillOnce(Return(std::vector<Reply>{Reply::make_string(script.legacy_sha1), ok()}));
  EXPECT_CALL(conn, command(legacy_evalsha())).WillOnce(Return(ok()));
  EXPECT_EQ(send_script_calls(conn, script, calls).at(0).integer, 7);
  EXPECT_TRUE(conn.script_path_state().server_before_7());
  EXPECT_EQ(send_script_calls(conn, script, calls).at(0).integer, 7);
}

TEST_F(ScriptFunctionsTest, AnAclRefusalOfFcallGoesToEvalsha) {
  InSequence order;
  EXPECT_CALL(conn, command(fcall()))
      .WillOnce(Return(Reply::make_error("NOPERM User u has no permissions to run the 'fcall' command")));
  EXPECT_CALL(conn, command(evalsha())).WillOnce(Return(ok()));
  EXPECT_EQ(send_script_calls(conn, script, calls).at(0).integer, 7);
  EXPECT_EQ(conn.script_path(), ScriptPath::evalsha);
}

TEST_F(ScriptFunctionsTest, AUserWhoMayCallButNotLoadAnAbsentLibraryGoesToEvalsha) {
  InSequence order;
  EXPECT_CALL(conn, command(fcall())).WillOnce(Return(missing()));
  EXPECT_CALL(conn, pipeline(Commands{load(), fcall()}))
      .WillOnce(Return(std::vector<Reply>{
          Reply::make_error("NOPERM User u has no permissions to run the 'function|load' command"), missing()}));
  EXPECT_CALL(conn, command(evalsha())).WillOnce(Return(ok()));
  EXPECT_EQ(send_script_calls(conn, script, calls).at(0).integer, 7);
  EXPECT_EQ(conn.script_path(), ScriptPath::evalsha);
}

// A reply that says nothing about Functions (the server is loading its data, a master failed in
// transit during the LOAD) settles nothing: the call gets its outcome, and the next call asks again.
TEST_F(ScriptFunctionsTest, AnOutageSettlesNothing) {
  InSequence order;
  const Reply loading = Reply::make_error("LOADING Redis is loading the dataset in memory");
  EXPECT_CALL(conn, command(fcall())).WillOnce(Return(loading));
  EXPECT_CALL(conn, command(fcall())).WillOnce(Return(missing()));
  EXPECT_CALL(conn, pipeline(Commands{load(), fcall()}))
      .WillOnce(Return(std::vector<Reply>{redlimit::transit_failure(redlimit::ConnectionError("reset")), missing()}));
  EXPECT_CALL(conn, command(evalsha())).WillOnce(Return(ok()));
  EXPECT_EQ(send_script_calls(conn, script, calls).at(0).str, loading.str);
  EXPECT_EQ(conn.script_path(), ScriptPath::probe);
  EXPECT_EQ(send_script_calls(conn, script, calls).at(0).integer, 7);  // EVALSHA this time
  EXPECT_EQ(conn.script_path(), ScriptPath::probe);
}

TEST_F(ScriptFunctionsTest, AScriptErrorShowsTheFunctionRan) {
  const Reply raised = Reply::make_error("ERR user_function:12: something the script raised");
  EXPECT_CALL(conn, command(fcall())).WillOnce(Return(raised));
  EXPECT_EQ(send_script_calls(conn, script, calls).at(0).str, raised.str);
  EXPECT_EQ(conn.script_path(), ScriptPath::functions);
}

TEST_F(ScriptFunctionsTest, AKeyAclRefusalIsTheCallsOwnAndKeepsFunctions) {
  conn.set_script_path(ScriptPath::functions);
  const Reply denied = Reply::make_error("NOPERM this user has no permissions to access one of the keys");
  EXPECT_CALL(conn, command(fcall())).WillOnce(Return(denied));
  EXPECT_EQ(send_script_calls(conn, script, calls).at(0).str, denied.str);
  EXPECT_EQ(conn.script_path(), ScriptPath::functions);
}

TEST_F(ScriptFunctionsTest, AFlushedLibraryIsLoadedOnceForTheWholeBatch) {
  conn.set_script_path(ScriptPath::functions);
  calls.push_back(calls.front());
  EXPECT_CALL(conn, pipeline(Commands{fcall(), fcall()})).WillOnce(Return(std::vector<Reply>{missing(), missing()}));
  EXPECT_CALL(conn, pipeline(Commands{load(), fcall(), fcall()}))
      .WillOnce(Return(std::vector<Reply>{Reply::make_string("lib"), ok(), ok()}));
  const auto replies = send_script_calls(conn, script, calls);
  ASSERT_EQ(replies.size(), 2u);
  EXPECT_EQ(replies[0].integer, 7);
  EXPECT_EQ(replies[1].integer, 7);
  EXPECT_EQ(conn.script_path(), ScriptPath::functions);
}

TEST_F(ScriptFunctionsTest, ABrokenRoundTripIsThrownAndNeverReplayed) {
  conn.set_script_path(ScriptPath::functions);
  EXPECT_CALL(conn, command(fcall())).WillOnce(Throw(redlimit::ConnectionError("reset by peer")));
  EXPECT_THROW(send_script_calls(conn, script, calls), redlimit::ConnectionError);
}

TEST_F(ScriptFunctionsTest, TheBaseConnectionStaysOnEvalsha) {
  StrictMock<MockConnection> plain;  // test doubles, the memory backend, a cluster router
  EXPECT_EQ(plain.script_path(), ScriptPath::evalsha);
  EXPECT_CALL(plain, command(evalsha())).WillOnce(Return(ok()));
  EXPECT_EQ(send_script_calls(plain, script, calls).at(0).integer, 7);
}

}  // namespace

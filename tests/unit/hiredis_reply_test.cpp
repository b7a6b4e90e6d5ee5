// detail::from_hiredis and is_error_code on error replies: a server older than Redis 7.0 wraps a
// refusal of a script's first write (a read-only replica, maxmemory, a failed save, missing
// replicas) in a script error; it is read as the refusal Redis 7.0 sends before running the script,
// and any other script error is left as it came.
#include "hiredis/hiredis_reply.hpp"

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <string>

namespace {

using redlimit::Reply;
using redlimit::detail::from_hiredis;
using redlimit::detail::is_error_code;

redisReply error_reply(std::string& text) {
  redisReply r{};
  r.type = REDIS_REPLY_ERROR;
  r.str = text.data();
  r.len = text.size();
  return r;
}

TEST(HiredisReply, ARefusalAtAScriptsFirstWriteOnRedis6ReadsAsTheRefusal) {
  std::string text =
      "ERR Error running script (call to f_1244d631fb9c81d222109aa663367febfc33787d): @user_script:1: "
      "@user_script: 1: -READONLY You can't write against a read only replica. ";
  const redisReply r = error_reply(text);
  const Reply reply = from_hiredis(r);
  ASSERT_TRUE(reply.is_error());
  EXPECT_EQ(reply.str.rfind("READONLY You can't write against a read only replica.", 0), 0u) << reply.str;
  EXPECT_NE(reply.str.find("older than Redis 7.0"), std::string::npos) << reply.str;
  EXPECT_TRUE(is_error_code(r, "READONLY"));
  for (const char* code : {"OOM", "MISCONF", "NOREPLICAS"}) {
    std::string other =
        "ERR Error running script (call to f_0): @user_script:9: @user_script: 9: -" + std::string(code) + " some text";
    EXPECT_EQ(from_hiredis(error_reply(other)).str.rfind(std::string(code) + " some text", 0), 0u) << code;
  }
}

TEST(HiredisReply, OtherScriptErrorsAndSevenOhRefusalsAreLeftAsTheyCame) {
  for (std::string text : {
           std::string("ERR Error running script (call to f_0): @user_script:3: user_script:3: attempt to "
                       "compare nil with number"),
           std::string("ERR Error running script (call to f_0): @user_script:9: @user_script: 9: -WRONGTYPE "
                       "Operation against a key holding the wrong kind of value"),
           std::string("READONLY You can't write against a read only replica."),
           std::string("ERR redlimit: a cost of 11 is above the limit of 10: -READONLY is no code here"),
       }) {
    const redisReply r = error_reply(text);
    EXPECT_EQ(from_hiredis(r).str, text);
    EXPECT_EQ(is_error_code(r, "READONLY"), text.rfind("READONLY", 0) == 0) << text;
  }
}

}  // namespace

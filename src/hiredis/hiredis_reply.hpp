#pragma once
// hiredis's redisReply tree to our Reply, shared by RedisConnection, AsyncRedis and the reply fuzzer.
#include "redlimit/reply.hpp"

struct redisReply;

namespace redlimit::detail {

// A deep copy of `r`. RESP3 types (hiredis 1.x) never arrive, since we never send HELLO 3; if one
// did, it becomes an error reply rather than being misread.
Reply from_hiredis(const redisReply& r);

}  // namespace redlimit::detail

#pragma once
// hiredis's redisReply tree to our Reply, shared by RedisConnection, AsyncRedis and the reply fuzzer.
#include <string_view>

#include "redlimit/reply.hpp"

struct redisReply;

namespace redlimit::detail {

// A deep copy of `r`. RESP3 types (hiredis 1.x) never arrive, since we never send HELLO 3; if one
// did, it becomes an error reply rather than being misread.
Reply from_hiredis(const redisReply& r);

// Whether `r` is an error reply whose text begins with `code` ("READONLY", "LOADING": Redis's
// error code, its first word).
bool is_error_code(const redisReply& r, std::string_view code);

}  // namespace redlimit::detail

#pragma once
// hiredis's redisReply tree to our Reply, shared by RedisConnection, AsyncRedis and the reply fuzzer.
#include <string_view>

#include "redlimit/reply.hpp"

struct redisReply;

namespace redlimit::detail {

// A deep copy of `r`. RESP3 types (hiredis 1.x) never arrive, since we never send HELLO 3; if one
// did, it becomes an error reply rather than being misread. A server older than Redis 7.0 wraps a
// replica's or maxmemory's refusal of a script's first write in a script error: it becomes the
// refusal's own error (READONLY ...), as 7.0 replies before running the script (hiredis_reply.cpp).
Reply from_hiredis(const redisReply& r);

// Whether `r` is an error reply whose text begins with `code` ("READONLY", "LOADING": Redis's
// error code, its first word), or one from_hiredis() reads as such.
bool is_error_code(const redisReply& r, std::string_view code);

}  // namespace redlimit::detail

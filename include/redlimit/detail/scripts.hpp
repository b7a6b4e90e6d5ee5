#pragma once
// The Lua sources, embedded at build time from lua/*.lua, each behind lua/prologue.lua
// (see cmake/embed_lua.cmake).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "redlimit/detail/config.hpp"
#include "redlimit/detail/script.hpp"

namespace redlimit::detail::scripts {

const Script& fixed_window();
const Script& sliding_log();
const Script& policy();  // also runs SlidingWindow, a policy of one limit
const Script& token_bucket();
const Script& leaky_bucket();
const Script& block();

// Where a strategy's decisions read its block, as block.lua's kind (its second parameter) names it:
// "1" the state is one string that holds it (token and leaky buckets: lua/helpers.lua,
// split_block), "2" a hash that holds it in a field (sliding window and policies: lua/policy.lua,
// read), "3" a fixed window's hash, which holds it in a field and in its counts
// (lua/fixed_window.lua), "4" a sliding log's sorted set, which holds it as a member above its
// entries (lua/sliding_log.lua, decide); "0" none (the marker alone: no strategy of this version).
const char* block_holder(const Script& script);

// The keys each request of the script sends: 2 for block.lua (the state, then the block marker it
// writes for earlier versions); 1, the state alone, for the strategies, whose state holds its
// block. lua/prologue.lua names them.
std::size_t keys_per_request(const Script& script);

// A strategy's parameters as its script takes them, at the end of its head: the words joined by
// spaces (lua/helpers.lua, params).
std::string params_arg(const std::vector<std::string>& words);
// A call's head, ARGV[2] (lua/prologue.lua): "<mode> <cost> <params>". Mode, cost and parameters
// go in one argument: each argument costs Redis an object, and Lua a string and a slot in ARGV.
std::string head(const char* mode, std::int64_t cost, const std::string& params);

// The Redis Functions library that holds every script above (cmake/embed_lua.cmake), and its name,
// which carries a hash of its code: two redlimit versions on one Redis never replace each other's.
std::string_view library();
std::string_view library_name();

}  // namespace redlimit::detail::scripts

#ifdef REDLIMIT_HEADER_ONLY
#include "redlimit/impl/scripts-inl.hpp"
#endif

#pragma once
// The Lua sources, embedded at build time from lua/*.lua, each behind lua/prologue.lua
// (see cmake/embed_lua.cmake).
#include "redlimit/detail/config.hpp"
#include "redlimit/detail/script.hpp"

namespace redlimit::detail::scripts {

const Script& fixed_window();
const Script& sliding_log();
const Script& policy();  // also runs SlidingWindow, a policy of one limit
const Script& token_bucket();
const Script& leaky_bucket();
const Script& block();

// True for the scripts whose state is one string (fixed window, token and leaky buckets): block.lua
// writes a block into that state, where their decisions read it (lua/helpers.lua, split_block).
bool keeps_string_state(const Script& script);

// The Redis Functions library that holds every script above (cmake/embed_lua.cmake), and its name,
// which carries a hash of its code: two redlimit versions on one Redis never replace each other's.
std::string_view library();
std::string_view library_name();

}  // namespace redlimit::detail::scripts

#ifdef REDLIMIT_HEADER_ONLY
#include "redlimit/impl/scripts-inl.hpp"
#endif

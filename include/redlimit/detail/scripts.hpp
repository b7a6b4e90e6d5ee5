#pragma once
// The Lua sources, embedded at build time from src/lua/*.lua (see cmake/embed_lua.cmake).
#include "redlimit/detail/script.hpp"

namespace redlimit::detail::scripts {

const Script& fixed_window();
const Script& sliding_log();
const Script& sliding_window();
const Script& token_bucket();
const Script& leaky_bucket();

}  // namespace redlimit::detail::scripts

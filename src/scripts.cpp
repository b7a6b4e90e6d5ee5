#include "redlimit/detail/scripts.hpp"

#include "redlimit/detail/lua_sources.hpp"  // generated from lua/*.lua (cmake/embed_lua.cmake)

namespace redlimit::detail::scripts {

#define REDLIMIT_SCRIPT(name)                          \
  const Script& name() {                               \
    static const Script script(#name, lua::name);      \
    return script;                                     \
  }
REDLIMIT_SCRIPT(fixed_window)
REDLIMIT_SCRIPT(sliding_log)
REDLIMIT_SCRIPT(policy)
REDLIMIT_SCRIPT(token_bucket)
REDLIMIT_SCRIPT(leaky_bucket)
REDLIMIT_SCRIPT(block)
#undef REDLIMIT_SCRIPT

}  // namespace redlimit::detail::scripts

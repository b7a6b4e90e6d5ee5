#include "redlimit/detail/scripts.hpp"

#include <string_view>

namespace redlimit::detail {

namespace lua {  // defined in the generated redlimit_lua.cpp
extern const std::string_view fixed_window;
extern const std::string_view sliding_log;
extern const std::string_view policy;
extern const std::string_view token_bucket;
extern const std::string_view leaky_bucket;
extern const std::string_view block;
}  // namespace lua

namespace scripts {

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

}  // namespace scripts
}  // namespace redlimit::detail

# Writes OUT, a C++ file with one string constant per LUA_DIR/*.lua script
# (redlimit::detail::lua::<name>), each being "#!lua", prologue.lua, the script itself, then, for
# a script that defines decide(), epilogue.lua (which runs decide() over the call's requests).
# The shebang (Redis >= 7.0) makes Redis refuse keys a script did not declare and keys of two
# cluster slots, so a routing mistake fails loudly instead of touching the wrong shard.
file(READ ${LUA_DIR}/prologue.lua prologue)
file(READ ${LUA_DIR}/epilogue.lua epilogue)
file(GLOB files ${LUA_DIR}/*.lua)
list(SORT files)
set(body "// Generated from src/lua/*.lua by cmake/embed_lua.cmake. Do not edit.\n#include <string_view>\n\nnamespace redlimit::detail::lua {\n")
foreach(f ${files})
  get_filename_component(name ${f} NAME_WE)
  if(name STREQUAL "prologue" OR name STREQUAL "epilogue")
    continue()
  endif()
  file(READ ${f} src)
  string(FIND "${src}" "local function decide(" has_decide)
  if(has_decide EQUAL -1)
    set(tail "")
  else()
    set(tail "\n${epilogue}")
  endif()
  string(APPEND body "extern const std::string_view ${name};\nconst std::string_view ${name} = R\"redlimit_lua(#!lua\n${prologue}\n-- ${name}.lua\n${src}${tail})redlimit_lua\";\n")
endforeach()
string(APPEND body "}  // namespace redlimit::detail::lua\n")
file(WRITE ${OUT}.tmp "${body}")
configure_file(${OUT}.tmp ${OUT} COPYONLY)

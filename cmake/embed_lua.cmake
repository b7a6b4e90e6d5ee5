# Writes OUT, a C++ header with one string constant per LUA_DIR/*.lua script
# (redlimit::detail::lua::<name>), each being "#!lua", prologue.lua, the script itself, then, for
# a script that defines decide(), epilogue.lua (which runs decide() over the call's requests).
# The shebang (Redis >= 7.0) makes Redis refuse keys a script did not declare and keys of two
# cluster slots, so a routing mistake fails loudly instead of touching the wrong shard.
# prologue.lua and epilogue.lua are parts, not scripts: they get no constant of their own.
cmake_policy(SET CMP0054 NEW)  # "prologue" below is a string, never a variable's value
cmake_policy(SET CMP0007 NEW)
file(READ ${LUA_DIR}/prologue.lua prologue_src)
file(READ ${LUA_DIR}/epilogue.lua epilogue_src)
file(GLOB files ${LUA_DIR}/*.lua)
list(SORT files)
set(body "// Generated from lua/*.lua by cmake/embed_lua.cmake. Do not edit.\n#pragma once\n#include <string_view>\n\nnamespace redlimit::detail::lua {\n")
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
    set(tail "\n${epilogue_src}")
  endif()
  string(APPEND body "inline constexpr std::string_view ${name} = R\"redlimit_lua(#!lua\n${prologue_src}\n-- ${name}.lua\n${src}${tail})redlimit_lua\";\n")
endforeach()
string(APPEND body "}  // namespace redlimit::detail::lua\n")
file(WRITE ${OUT}.tmp "${body}")
configure_file(${OUT}.tmp ${OUT} COPYONLY)
file(REMOVE ${OUT}.tmp)

# Writes OUT, a C++ header of string constants (redlimit::detail::lua) made from LUA_DIR/*.lua:
# - <name>: an EVAL script per file: "#!lua", helpers.lua, the script's load part, prologue.lua, the
#   script's per-call part, then, for a script that defines decide(), epilogue.lua (which runs
#   decide() over the call's requests) with its load part after the script's; a script with a
#   <name>_spread function (below) has spread_eval.lua before its prologue, the same calls over
#   EVALSHA, and the shebang "#!lua flags=allow-cross-slot-keys" (a server older than 7.0 gets
#   the text without its first line: detail::Script::legacy_source);
# - library: the same scripts as one Redis Functions library (Redis >= 7.0). helpers.lua runs once,
#   at load, and so does each script's load part, in a do-block of its own with the function that
#   serves the script's calls (prologue, per-call part, epilogue), registered as <name>_function;
#   a script that defines decide(), or runs its own requests (a line starting "-- Runs its own
#   requests" before its per-call part: fixed_window.lua), also gets <name>_spread (flag
#   allow-cross-slot-keys): the same function for requests of many slots of one cluster node,
#   which declares one key and takes the others among its arguments (detail::ScriptCall::spread),
#   and sets the helpers' `spread`.
#   The library and its functions are named after the SHA1 of the library's code (library_name),
#   so two versions of redlimit sharing one Redis during a rolling deploy each call their own
#   functions and never replace the other's.
# A script (and the epilogue) splits itself with a line starting "-- Per call:". Before it: decide()
# and the other functions, constant tables, and the locals each call assigns; so a call of a
# function creates no closure and no constant table (a closure and its upvalues cost an allocation
# each, and were a sixth of a fixed-window decision's Redis CPU). After it: what each call runs. A
# script without the line is all per call. As an EVAL script every part runs on every call, with
# the same meaning.
# The shebang makes Redis refuse keys of two cluster slots, so a routing mistake fails loudly
# instead of touching the wrong shard; a spread-capable script's allows them (each key must still be
# served by the node the call reached), as its <name>_spread function does.
# helpers.lua, prologue.lua, epilogue.lua and spread_eval.lua are parts, not scripts: they get no
# constant of their own.
# So is every file in LUA_DIR/parts/: a line "-- Part: parts/<file>.lua" of a script or of the
# epilogue is replaced by that file's text, so that a long script keeps a piece of itself (its
# common paths) in a file of its own, or two loops share a text they each run inline, and each still
# runs as one text (its locals are the part's).
cmake_policy(SET CMP0054 NEW)  # "prologue" below is a string, never a variable's value
cmake_policy(SET CMP0007 NEW)
cmake_policy(SET CMP0057 NEW)  # if(... IN_LIST ...)
# TEXT with each line "-- Part: <path>" replaced by the file LUA_DIR/<path>, in RESULT.
function(include_parts text result)
  string(REGEX MATCHALL "\n-- Part: [^\n]*" lines "${text}")
  foreach(line ${lines})
    string(REGEX REPLACE "^\n-- Part: " "" path "${line}")
    if(NOT EXISTS ${LUA_DIR}/${path})
      message(FATAL_ERROR "embed_lua.cmake: ${line} names no file in ${LUA_DIR}")
    endif()
    file(READ ${LUA_DIR}/${path} part)
    string(REPLACE "${line}" "\n-- ${path}\n${part}" text "${text}")
  endforeach()
  set(${result} "${text}" PARENT_SCOPE)
endfunction()
# Splits TEXT at its line starting "-- Per call:" into LOAD (before it) and CALL (from it on); a text
# without that line is all CALL.
function(split_per_call text load call)
  string(FIND "${text}" "\n-- Per call:" at)
  if(at EQUAL -1)
    set(${load} "" PARENT_SCOPE)
    set(${call} "${text}" PARENT_SCOPE)
  else()
    math(EXPR at "${at} + 1")
    string(SUBSTRING "${text}" 0 ${at} before)
    string(SUBSTRING "${text}" ${at} -1 after)
    set(${load} "${before}" PARENT_SCOPE)
    set(${call} "${after}" PARENT_SCOPE)
  endif()
endfunction()
file(READ ${LUA_DIR}/helpers.lua helpers_src)
file(READ ${LUA_DIR}/prologue.lua prologue_src)
file(READ ${LUA_DIR}/epilogue.lua epilogue_src)
include_parts("${epilogue_src}" epilogue_src)
file(READ ${LUA_DIR}/spread_eval.lua spread_eval_src)
# The epilogue splits the same way as a script (below): its load part follows the script's.
split_per_call("${epilogue_src}" epilogue_load epilogue_src)
file(GLOB files ${LUA_DIR}/*.lua)
list(SORT files)
set(body "// Generated from lua/*.lua by cmake/embed_lua.cmake. Do not edit.\n#pragma once\n#include <string_view>\n\nnamespace redlimit::detail::lua {\n")
# @HASH@ stands for the library's hash until the whole text is known.
set(library "#!lua name=redlimit_@HASH@\n${helpers_src}")
set(names "")
set(spread_names "")
foreach(f ${files})
  get_filename_component(name ${f} NAME_WE)
  if(name STREQUAL "helpers" OR name STREQUAL "prologue" OR name STREQUAL "epilogue" OR name STREQUAL "spread_eval")
    continue()
  endif()
  list(APPEND names ${name})
  file(READ ${f} src)
  include_parts("${src}" src)
  split_per_call("${src}" load src)
  # decide() is a function, or a local the script sets per call (policy.lua)
  string(REGEX MATCH "function decide\\(|\nlocal decide[ ,]" has_decide "${load}${src}")
  string(FIND "${load}" "\n-- Runs its own requests" own_requests)
  set(spread "")
  set(eval_spread "")
  set(shebang "#!lua")
  set(tail "")
  if(has_decide)
    string(APPEND load "${epilogue_load}")
    set(tail "\n${epilogue_src}")
  endif()
  if(has_decide OR NOT own_requests EQUAL -1)
    list(APPEND spread_names ${name})
    # <name>_spread: the same decisions for requests of many slots of one cluster node. FCALL
    # declares one key (the first request's state: it routes the call, and a redirect names its
    # slot's owner); args[1] is how many keys follow it, then the keys, then the script's ARGV.
    set(eval_spread "${spread_eval_src}")
    set(shebang "#!lua flags=allow-cross-slot-keys")
    set(spread "redis.register_function{function_name = 'redlimit_@HASH@_${name}_spread', flags = {'allow-cross-slot-keys'},\n  callback = function(_, args)\n    local keys, argv = unspread(args, 1)\n    return run_${name}(keys, argv, true)\n  end}\n")
  endif()
  string(APPEND body "inline constexpr std::string_view ${name} = R\"redlimit_lua(${shebang}\n${helpers_src}\n-- ${name}.lua\n${load}${eval_spread}${prologue_src}\n${src}${tail})redlimit_lua\";\n")
  string(APPEND library "\ndo\n-- ${name}.lua\n${load}local function run_${name}(KEYS, ARGV, across_slots)\nspread = across_slots == true\n${prologue_src}\n${src}${tail}\nend\nredis.register_function('redlimit_@HASH@_${name}', run_${name})\n${spread}end\n")
endforeach()
string(SHA1 hash "${library}")
string(SUBSTRING "${hash}" 0 16 hash)
string(REPLACE "@HASH@" "${hash}" library "${library}")
string(APPEND body "inline constexpr std::string_view library_name = \"redlimit_${hash}\";\n")
string(APPEND body "inline constexpr std::string_view library = R\"redlimit_lua(${library})redlimit_lua\";\n")
foreach(name ${names})
  string(APPEND body "inline constexpr std::string_view ${name}_function = \"redlimit_${hash}_${name}\";\n")
  if(name IN_LIST spread_names)
    string(APPEND body "inline constexpr std::string_view ${name}_spread_function = \"redlimit_${hash}_${name}_spread\";\n")
  else()
    string(APPEND body "inline constexpr std::string_view ${name}_spread_function = \"\";\n")
  endif()
endforeach()
string(APPEND body "}  // namespace redlimit::detail::lua\n")
file(WRITE ${OUT}.tmp "${body}")
configure_file(${OUT}.tmp ${OUT} COPYONLY)
file(REMOVE ${OUT}.tmp)

#pragma once
// How MemoryConnection runs a script: the twin of a script known by SHA1 or source (twins.hpp), run
// through the twin of lua/epilogue.lua over the call's keys, against the store (store.hpp).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "redlimit/reply.hpp"
#include "store.hpp"

namespace redlimit::detail::memory {

enum class ScriptId { fixed_window, sliding_log, policy, token_bucket, leaky_bucket, block };

// The twin of a script known by its SHA1 (case-insensitive hex) or by its exact source.
std::optional<ScriptId> script_by_sha1(std::string_view sha1);
std::optional<ScriptId> script_by_source(std::string_view source);
std::string_view script_name(ScriptId id);

// The keys a request of `id` sends (lua/prologue.lua): 2 (state, block marker) for block.lua, 1
// (the state) for the others.
std::size_t keys_per_request(ScriptId id);

// The twins take a time in [0, kMaxNow): what the scripts' doubles hold exactly.
inline constexpr std::int64_t kMaxNow = std::int64_t{1} << 53;
// The prologue's `now` (lua/prologue.lua): ARGV[1] read as a number the way Lua reads it, a whole
// number in [0, kMaxNow), or (ARGV[1] == "redis") the clock's time; nullopt where the script
// raises an error.
std::optional<std::int64_t> script_now(std::string_view argv1, std::int64_t clock_now);
// The most a count, a capacity or a cost may be (Limit::max_count; lua/helpers.lua, MAX_COUNT).
inline constexpr std::int64_t kMaxCount = std::int64_t{1} << 40;
// `s` as the scripts read a parameter or a cost (lua/helpers.lua, integer_in): decimal digits
// only, a number in [lo, hi]; nullopt for anything else.
std::optional<std::int64_t> decimal_in(std::string_view s, std::int64_t lo, std::int64_t hi);

// The scripts' checks of their parameters (lua/helpers.lua, param), words[0..n) of the head's
// `params`: the error a script raises for them before it reads a key, or nullopt when they pass.
std::optional<std::string> params_error(ScriptId id, const std::string_view* words, std::size_t n,
                                        std::string_view params);

// The table a key lives in. The caller holds the lock of every table the call's keys map to.
class Tables {
 public:
  virtual Table& of(const std::string& key) = 0;

 protected:
  ~Tables() = default;
};

// One EVALSHA of `id` with KEYS = keys[0..nkeys) (keys_per_request(id) a request; nkeys a multiple,
// at least one request's) and ARGV = args (args[0] is ARGV[1]; param_words of them, from args[3] on,
// the head's parameters: Call), at time `now` (script_now()), as one atomic step:
// every request of a batch sees the same now and the writes of the requests before it.
// Returns what Redis returns: the decisions one after the other, or an error reply where the
// script raises an error. Like Redis, which does not roll a script back, an error keeps the writes
// already made: none for a string state (the epilogue writes those after every decide()), those of
// the requests before it for a sorted set or a hash (their decide() writes as it goes).
Reply run_script(ScriptId id, const std::string* keys, std::size_t nkeys, const std::vector<std::string_view>& args,
                 std::size_t param_words, std::int64_t now, Tables& tables);

}  // namespace redlimit::detail::memory

#include "hiredis_reply.hpp"

#include <fmt/format.h>
#include <hiredis/hiredis.h>

namespace redlimit::detail {

namespace {

// A server older than Redis 7.0 runs a script without flags (Script::legacy_source) and refuses
// its writes one by one, where 7.0 refuses a script with a shebang before it runs. The first write
// of a script on a read-only replica (READONLY), over maxmemory (OOM: checked before the script's
// first write only), after a failed RDB save (MISCONF) or short of replicas (NOREPLICAS) raises
// that error, and the server wraps it: "ERR Error running script (call to f_<sha1>): @user_script:12:
// @user_script: 12: -READONLY You can't write against a read only replica.". None of those
// conditions changes while a script runs, so no write of it took place: the script's reads only.
// Returns the error's own text from its code on ("READONLY You can't ..."), so that the reply is
// judged as 7.0's refusal (an outage, the connection let go, the call sent again to a new Sentinel
// master); else an empty view.
std::string_view raised_at_first_write(std::string_view text) {
  if (text.rfind("ERR Error running script", 0) != 0) return {};
  const std::size_t dash = text.rfind(": -");
  if (dash == std::string_view::npos) return {};
  const std::string_view raised = text.substr(dash + 3);
  for (std::string_view code : {"READONLY ", "OOM ", "MISCONF ", "NOREPLICAS "}) {
    if (raised.rfind(code, 0) == 0) return raised;
  }
  return {};
}

}  // namespace

bool is_error_code(const redisReply& r, std::string_view code) {
  if (r.type != REDIS_REPLY_ERROR) return false;
  std::string_view text(r.str, r.len);
  if (const std::string_view raised = raised_at_first_write(text); !raised.empty()) text = raised;
  return text.substr(0, code.size()) == code;
}

Reply from_hiredis(const redisReply& r) {
  switch (r.type) {
    case REDIS_REPLY_STRING:
      return Reply::make_string(std::string(r.str, r.len));
    case REDIS_REPLY_STATUS:
      return Reply::make_status(std::string(r.str, r.len));
    case REDIS_REPLY_ERROR: {
      const std::string_view text(r.str, r.len);
      const std::string_view raised = raised_at_first_write(text);
      if (raised.empty()) return Reply::make_error(std::string(text));
      return Reply::make_error(fmt::format("{} (raised at a script's first write by a server older than Redis 7.0)",
                                           raised.substr(0, raised.find_last_not_of(" \r\n") + 1)));
    }
    case REDIS_REPLY_INTEGER:
      return Reply::make_integer(r.integer);
    case REDIS_REPLY_NIL:
      return Reply::make_nil();
    case REDIS_REPLY_ARRAY: {
      std::vector<Reply> items;
      items.reserve(r.elements);
      for (std::size_t i = 0; i < r.elements; ++i) items.push_back(from_hiredis(*r.element[i]));
      return Reply::make_array(std::move(items));
    }
    default:
      return Reply::make_error(fmt::format("ERR redlimit: unexpected reply type {}", r.type));
  }
}

}  // namespace redlimit::detail

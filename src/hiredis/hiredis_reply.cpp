#include "hiredis_reply.hpp"

#include <fmt/format.h>
#include <hiredis/hiredis.h>

namespace redlimit::detail {

bool is_error_code(const redisReply& r, std::string_view code) {
  return r.type == REDIS_REPLY_ERROR && std::string_view(r.str, r.len).substr(0, code.size()) == code;
}

Reply from_hiredis(const redisReply& r) {
  switch (r.type) {
    case REDIS_REPLY_STRING:
      return Reply::make_string(std::string(r.str, r.len));
    case REDIS_REPLY_STATUS:
      return Reply::make_status(std::string(r.str, r.len));
    case REDIS_REPLY_ERROR:
      return Reply::make_error(std::string(r.str, r.len));
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

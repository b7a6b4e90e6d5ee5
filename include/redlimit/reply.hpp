#pragma once
// A Redis reply as a plain value tree, independent of hiredis, so that the Connection seam can be
// mocked and the decoder can be tested (and fuzzed) without a server.
#include <cstdint>
#include <string>
#include <vector>

namespace redlimit {

struct Reply {
  enum class Type { nil, integer, string, status, error, array };

  Type type = Type::nil;
  std::int64_t integer = 0;   // Type::integer
  std::string str;            // Type::string, Type::status, Type::error
  std::vector<Reply> elements;  // Type::array

  static Reply make_nil() { return Reply{}; }
  static Reply make_integer(std::int64_t v) {
    Reply r;
    r.type = Type::integer;
    r.integer = v;
    return r;
  }
  static Reply make_string(std::string s) { return with_text(Type::string, std::move(s)); }
  static Reply make_status(std::string s) { return with_text(Type::status, std::move(s)); }
  static Reply make_error(std::string s) { return with_text(Type::error, std::move(s)); }
  static Reply make_array(std::vector<Reply> items) {
    Reply r;
    r.type = Type::array;
    r.elements = std::move(items);
    return r;
  }

  bool is_error() const { return type == Type::error; }

 private:
  static Reply with_text(Type t, std::string s) {
    Reply r;
    r.type = t;
    r.str = std::move(s);
    return r;
  }
};

}  // namespace redlimit

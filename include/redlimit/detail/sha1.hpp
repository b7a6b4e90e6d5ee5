#pragma once
#include <string>
#include <string_view>

namespace redlimit::detail {

// Lowercase hex SHA1, the digest Redis uses to name cached scripts.
std::string sha1_hex(std::string_view data);

}  // namespace redlimit::detail

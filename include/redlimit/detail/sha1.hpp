#pragma once
#include "redlimit/detail/config.hpp"
#include <string>
#include <string_view>

namespace redlimit::detail {

// Lowercase hex SHA1, the digest Redis uses to name cached scripts.
std::string sha1_hex(std::string_view data);

}  // namespace redlimit::detail

#ifdef REDLIMIT_HEADER_ONLY
#include "redlimit/impl/sha1-inl.hpp"
#endif

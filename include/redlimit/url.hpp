#pragma once
// Where the server is: redis://[:password@]host[:port][/db], redis://user:password@host,
// unix:///path/to.sock[?db=N&password=P]. IPv6 hosts go in brackets: redis://[::1]:6379.
#include "redlimit/detail/config.hpp"
#include <string>
#include <string_view>

namespace redlimit {

struct Endpoint {
  std::string host;         // empty for unix sockets
  int port = 6379;
  std::string unix_path;    // set for unix:// URLs
  std::string username;     // Redis 6 ACL user; empty = default user
  std::string password;     // empty = no AUTH
  int db = 0;
};

// Throws InvalidArgument naming what is wrong (quoting the URL as redact_url() writes it). The scheme
// is case-insensitive.
Endpoint parse_url(std::string_view url);

// `url` as it may be printed (errors, logs, metrics): the password replaced by "***" (the whole
// userinfo when it has no user, and a password= query parameter), unprintable bytes as \xNN.
std::string redact_url(std::string_view url);

// True when `url` starts with `scheme` ("redis://", lower case), in any case.
bool has_scheme(std::string_view url, std::string_view scheme);

}  // namespace redlimit

#ifdef REDLIMIT_HEADER_ONLY
#include "redlimit/impl/url-inl.hpp"
#endif

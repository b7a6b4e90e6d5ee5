#pragma once
// Bodies of redlimit/url.hpp, part 3: parse_sentinel_url, a redis-sentinel:// URL into the sentinels,
// the master's name and what the master and the sentinels are asked with. Built on the one-server
// parser's pieces (url-inl.hpp: hosts, userinfo, the query and its sentinel_* parameters).
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "redlimit/detail/config.hpp"
#include "redlimit/impl/url-inl.hpp"
#include "redlimit/url.hpp"

namespace redlimit {

namespace url_impl {

// host1[:port],host2[:port]: the sentinels (port 26379 by default).
REDLIMIT_INLINE std::vector<Endpoint> parse_sentinel_hosts(std::string_view url, std::string_view hosts) {
  std::vector<Endpoint> out;
  while (true) {
    const std::size_t comma = hosts.find(',');
    Endpoint s;
    s.port = 26379;
    const std::string_view port = parse_host(url, hosts.substr(0, comma), s);
    if (!port.empty()) s.port = parse_int(url, port, "port", 1, 65535);
    out.push_back(std::move(s));
    if (comma == std::string_view::npos) return out;
    hosts.remove_prefix(comma + 1);
  }
}

// <master-name>[/db]
REDLIMIT_INLINE void parse_sentinel_path(std::string_view url, std::string_view path, SentinelEndpoint& out,
                                         std::vector<std::string_view>& given) {
  const std::size_t slash = path.find('/');
  out.master_name = decode(url, path.substr(0, slash));
  if (out.master_name.empty()) bad(url, "a Sentinel URL names its master: redis-sentinel://host:26379/mymaster");
  if (slash == std::string_view::npos) return;
  const std::string_view db = path.substr(slash + 1);
  if (db.empty()) return;
  out.master.db = parse_int(url, db, "db", 0, 1 << 20);
  given.push_back("db");
}

// `tls`: rediss-sentinel://, whose tls_* parameters are the sentinels' and the master's alike.
REDLIMIT_INLINE SentinelEndpoint parse_sentinel(std::string_view url, std::string_view rest, bool tls) {
  SentinelEndpoint out;
  out.master.tls.enabled = tls;
  const std::string_view query = split_query(url, rest);
  const std::size_t slash = rest.find('/');
  if (slash == std::string_view::npos) {
    bad(url, "a Sentinel URL names its master: redis-sentinel://host:26379/mymaster");
  }
  std::string_view authority = rest.substr(0, slash);
  Query q;
  q.sentinel = true;
  parse_sentinel_path(url, rest.substr(slash + 1), out, q.given);
  const std::size_t at = authority.rfind('@');
  if (at != std::string_view::npos) {
    parse_userinfo(url, authority.substr(0, at), out.master, q.given);
    authority = authority.substr(at + 1);
  }
  out.sentinels = parse_sentinel_hosts(url, authority);
  parse_query(url, query, out.master, q);
  resolve_password(url, "password_env", q.password_env, out.master.password);
  resolve_password(url, "sentinel_password_env", q.sentinel_password_env, q.sentinel_password);
  if (!q.sentinel_user.empty() && q.sentinel_password.empty()) bad(url, "sentinel_user needs a sentinel password");
  if (q.sentinel_check_ms >= 0) out.check_interval_ms = q.sentinel_check_ms;
  for (auto& s : out.sentinels) {
    s.username = q.sentinel_user;
    s.password = q.sentinel_password;
    s.tls = out.master.tls;  // each verified under its own host name, unless tls_server_name says one
  }
  out.master.host.clear();
  out.master.port = 0;
  return out;
}

}  // namespace url_impl

REDLIMIT_INLINE SentinelEndpoint parse_sentinel_url(std::string_view url) {
  if (url_impl::has_control_byte(url)) url_impl::bad(url, "control bytes are not allowed in a URL");
  constexpr std::string_view kPlain = "redis-sentinel://", kTls = "rediss-sentinel://";
  const bool tls = has_scheme(url, kTls);
  if (!tls && !has_scheme(url, kPlain)) url_impl::bad(url, "scheme must be redis-sentinel:// or rediss-sentinel://");
  return url_impl::parse_sentinel(url, url.substr(tls ? kTls.size() : kPlain.size()), tls);
}

}  // namespace redlimit

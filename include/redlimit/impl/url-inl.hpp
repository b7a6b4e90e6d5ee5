#pragma once
// Bodies of redlimit/url.hpp (see redlimit/detail/config.hpp: compiled once in src/redlimit.cpp, or inline
// with REDLIMIT_HEADER_ONLY): one server's URL (redis://, rediss://, unix://) and what every parser
// shares. The redis-sentinel:// URL is in url_sentinel-inl.hpp, its secrets' redaction in
// url_redact-inl.hpp.
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <utility>

#include "redlimit/detail/config.hpp"
#include "redlimit/detail/message.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/url.hpp"
#include "redlimit/impl/url_redact-inl.hpp"

namespace redlimit {

namespace url_impl {

[[noreturn]] REDLIMIT_INLINE void bad(std::string_view url, const std::string& why) {
  throw InvalidArgument(detail::message("URL \"{}\": {}", redact_url(url), why));
}

// Bytes below 0x20 and DEL.
REDLIMIT_INLINE bool has_control_byte(std::string_view s) {
  return std::any_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
}

REDLIMIT_INLINE int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Percent-decoding, so passwords may hold '@', ':' or '/'.
REDLIMIT_INLINE std::string decode(std::string_view url, std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    if (i + 2 >= s.size()) bad(url, "truncated %-escape");
    const int hi = hex_value(s[i + 1]), lo = hex_value(s[i + 2]);
    if (hi < 0 || lo < 0) bad(url, "bad %-escape");
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

REDLIMIT_INLINE int parse_int(std::string_view url, std::string_view s, const char* what, int lo, int hi) {
  if (s.empty() || s.size() > 9) bad(url, detail::message("{} must be a number in [{}, {}]", what, lo, hi));
  int v = 0;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) {
      bad(url, detail::message("{} must be a number in [{}, {}]", what, lo, hi));
    }
    v = v * 10 + (c - '0');
  }
  if (v < lo || v > hi) bad(url, detail::message("{} must be a number in [{}, {}]", what, lo, hi));
  return v;
}

REDLIMIT_INLINE void parse_userinfo(std::string_view url, std::string_view info, Endpoint& e,
                                    std::vector<std::string_view>& given) {
  const std::size_t colon = info.find(':');
  if (colon == std::string_view::npos) {
    e.password = decode(url, info);  // redis://password@host, as redis-cli accepts
  } else {
    e.username = decode(url, info.substr(0, colon));
    e.password = decode(url, info.substr(colon + 1));
    if (!e.username.empty()) given.push_back("user");  // (":secret@host?user=app" names the user once)
  }
  given.push_back("password");
}

REDLIMIT_INLINE bool parse_bool(std::string_view url, std::string_view name, std::string_view value) {
  if (value == "true" || value == "1" || value == "yes") return true;
  if (value == "false" || value == "0" || value == "no") return false;
  bad(url, detail::message("{} must be true or false", detail::printable(name)));
}

// tls_* parameters; false if `name` is not one. `tls_scheme`: the scheme that takes them, named
// when the URL's does not ("rediss://", "rediss-sentinel://").
REDLIMIT_INLINE bool parse_tls_parameter(std::string_view url, std::string_view name, std::string_view value,
                                         TlsOptions& tls, std::string_view tls_scheme) {
  if (name.substr(0, 4) != "tls_") return false;
  if (!tls.enabled) bad(url, detail::message("{} needs a {} URL", detail::printable(name), tls_scheme));
  std::string* field = nullptr;
  if (name == "tls_ca_file") field = &tls.ca_file;
  if (name == "tls_ca_dir") field = &tls.ca_dir;
  if (name == "tls_cert_file") field = &tls.cert_file;
  if (name == "tls_key_file") field = &tls.key_file;
  if (name == "tls_server_name") field = &tls.server_name;
  if (field != nullptr) {
    *field = decode(url, value);
    if (field->empty()) bad(url, detail::message("{} must not be empty", detail::printable(name)));
    // The TLS code hands these to OpenSSL as C strings: a decoded %00 would cut a CA file or the
    // name checked against the certificate short without a word ("ca.pem%00.bogus" loads "ca.pem"),
    // and no control byte belongs in a path or a host name. The value is not quoted.
    if (has_control_byte(*field)) {
      bad(url, detail::message("{} must not hold control bytes (percent-encoded or not)", detail::printable(name)));
    }
  } else if (name == "tls_insecure_skip_verify") {
    tls.insecure_skip_verify = parse_bool(url, name, value);
  } else {
    bad(url, detail::message("unknown TLS parameter \"{}\"", detail::printable(name)));
  }
  return true;
}

// What a query says beyond an Endpoint's own fields: the names of environment variables to read
// passwords from, and (redis-sentinel:// only) the sentinels' credentials.
struct Query {
  bool sentinel = false;  // sentinel_* parameters allowed
  // What the URL has set so far, by parameter name ("user" for username too): the path's db, the
  // userinfo's user and password, then each query parameter. A second value would silently win.
  std::vector<std::string_view> given;
  std::string password_env;
  std::string sentinel_user, sentinel_password, sentinel_password_env;
  int sentinel_check_ms = -1;  // -1: not given
};

// sentinel_* parameters; false if `name` is not one.
REDLIMIT_INLINE bool parse_sentinel_parameter(std::string_view url, std::string_view name, std::string_view value,
                                              Query& q) {
  if (name == "sentinel_check_ms") {
    if (!q.sentinel) bad(url, "sentinel_check_ms needs a redis-sentinel:// URL");
    q.sentinel_check_ms = parse_int(url, value, "sentinel_check_ms", 0, 3600000);
    return true;
  }
  std::string* field = nullptr;
  if (name == "sentinel_user" || name == "sentinel_username") field = &q.sentinel_user;
  if (name == "sentinel_password") field = &q.sentinel_password;
  if (name == "sentinel_password_env") field = &q.sentinel_password_env;
  if (field == nullptr) return false;
  if (!q.sentinel) bad(url, detail::message("{} needs a redis-sentinel:// URL", detail::printable(name)));
  *field = decode(url, value);
  if (field == &q.sentinel_password_env && field->empty()) {
    bad(url, "sentinel_password_env must name an environment variable");
  }
  return true;
}

// Why a part after a password is not quoted, and what to do.
inline constexpr std::string_view kAmpersand =
    " (not quoted: it may be the tail of a password holding a raw '&'; percent-encode that as %26)";

// ?db=N&password=P&user=U&password_env=NAME, the tls_* parameters of a rediss:// URL and the
// sentinel_* ones of a redis-sentinel:// URL.
REDLIMIT_INLINE void parse_query(std::string_view url, std::string_view query, Endpoint& e, Query& q) {
  // After a password, a part that is no parameter may be the tail of a password holding a raw '&':
  // the message then quotes neither it nor its name.
  bool after_password = false;
  while (!query.empty()) {
    const std::size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    const std::size_t eq = pair.find('=');
    if (after_password && eq == std::string_view::npos) {
      bad(url, detail::message("a query part after a password has no '='{}", kAmpersand));
    }
    if (eq == std::string_view::npos) bad(url, detail::message("query part \"{}\" has no '='", detail::printable(pair)));
    const std::string_view name = pair.substr(0, eq), value = pair.substr(eq + 1);
    if (after_password && !known_parameter(name)) {
      bad(url, detail::message("unknown query parameter after a password{}", kAmpersand));
    }
    after_password = after_password || secret_key(name);
    const std::string_view key = name == "username" ? "user" : name == "sentinel_username" ? "sentinel_user" : name;
    if (std::find(q.given.begin(), q.given.end(), key) != q.given.end()) {
      bad(url, detail::message("{} is given twice (in the path or before the host, and in the query, or twice there)",
                               detail::printable(key)));
    }
    q.given.push_back(key);
    if (name == "db") {
      e.db = parse_int(url, value, "db", 0, 1 << 20);
    } else if (name == "password") {
      e.password = decode(url, value);
    } else if (name == "password_env") {
      q.password_env = decode(url, value);
      if (q.password_env.empty()) bad(url, "password_env must name an environment variable");
    } else if (name == "user" || name == "username") {
      e.username = decode(url, value);
    } else if (parse_tls_parameter(url, name, value, e.tls, q.sentinel ? "rediss-sentinel://" : "rediss://") ||
               parse_sentinel_parameter(url, name, value, q)) {
    } else {
      bad(url, detail::message("unknown query parameter \"{}\"", detail::printable(name)));
    }
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
}

// The value of the environment variable `name`, for the query parameter `param` (password_env,
// sentinel_password_env). The message names the variable, never a value.
REDLIMIT_INLINE std::string from_env(std::string_view url, std::string_view param, const std::string& name) {
  bool valid = !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0]));
  for (char c : name) valid = valid && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
  if (!valid) bad(url, detail::message("{} must name an environment variable ([A-Za-z_][A-Za-z0-9_]*)", param));
  const char* value = std::getenv(name.c_str());
  if (value == nullptr) bad(url, detail::message("{}: the environment variable {} is not set", param, name));
  if (*value == '\0') bad(url, detail::message("{}: the environment variable {} is empty", param, name));
  return value;
}

// `password` from the variable named by `env` (when given); a password given as well is refused.
REDLIMIT_INLINE void resolve_password(std::string_view url, std::string_view param, const std::string& env,
                                      std::string& password) {
  if (env.empty()) return;
  if (!password.empty()) bad(url, detail::message("a password and {} are given: use one", param));
  password = from_env(url, param, env);
}

// One server's query (redis://, rediss://, unix://), its password_env resolved; `q` holds what the
// URL set before it (Query::given).
REDLIMIT_INLINE void parse_endpoint_query(std::string_view url, std::string_view query, Endpoint& e, Query q = {}) {
  parse_query(url, query, e, q);
  resolve_password(url, "password_env", q.password_env, e.password);
}

// Splits `rest` at the first '?' into what comes before and the query. An '@' after it is either a
// password holding a raw '?' or a query value holding a raw '@': refused without quoting either (a
// password's tail would show).
REDLIMIT_INLINE std::string_view split_query(std::string_view url, std::string_view& rest) {
  const std::size_t q = rest.find('?');
  if (q == std::string_view::npos) return {};
  if (rest.find('@', q) != std::string_view::npos) {
    bad(url, "'@' after '?': percent-encode a '?' in a password as %3F and an '@' in a query value as %40");
  }
  const std::string_view query = rest.substr(q + 1);
  rest = rest.substr(0, q);
  return query;
}

REDLIMIT_INLINE Endpoint parse_unix(std::string_view url, std::string_view rest) {
  Endpoint e;
  const std::string_view query = split_query(url, rest);
  if (!query.empty()) parse_endpoint_query(url, query, e);
  if (rest.empty() || rest[0] != '/') bad(url, "a unix socket URL needs an absolute path: unix:///path.sock");
  e.unix_path = std::string(rest);
  e.port = 0;
  return e;
}

// A host as hiredis will resolve it: a name or IPv4 address (letters, digits, '.', '-' and '_', which
// some private names use), or inside [] an IPv6 address (hex digits, ':' and '.') with an optional
// zone, written "%25<zone>" in a URL (RFC 6874) and given to the resolver as "%<zone>". Anything
// else ("host#frag", "ho st") would fail only at connect, as a ConnectionError.
REDLIMIT_INLINE bool name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_';
}
REDLIMIT_INLINE std::string checked_host(std::string_view url, std::string_view host, bool v6) {
  std::string_view zone;
  if (v6) {
    const std::size_t pct = host.find('%');
    if (pct != std::string_view::npos) {
      if (host.substr(pct, 3) != "%25" || pct + 3 == host.size()) bad(url, "an IPv6 zone is written %25<zone>");
      zone = host.substr(pct + 3);
      host = host.substr(0, pct);
    }
  }
  for (const char c : host) {
    const bool ok = v6 ? (std::isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.') : name_char(c);
    if (!ok) bad(url, detail::message("the host holds '{}', which no {} does", detail::printable({&c, 1}),
                                      v6 ? "IPv6 address" : "host name"));
  }
  for (const char c : zone) {
    if (!name_char(c) && c != '~') bad(url, "an IPv6 zone holds letters, digits, '.', '-', '_' and '~'");
  }
  return zone.empty() ? std::string(host) : std::string(host) + "%" + std::string(zone);
}

// host, host:port, [v6], [v6]:port; returns the port text (empty: the default).
REDLIMIT_INLINE std::string_view parse_host(std::string_view url, std::string_view authority, Endpoint& e) {
  std::string_view port;
  if (!authority.empty() && authority[0] == '[') {
    const std::size_t close = authority.find(']');
    if (close == std::string_view::npos) bad(url, "unclosed '[' in IPv6 host");
    e.host = checked_host(url, authority.substr(1, close - 1), true);
    const std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') bad(url, "expected ':' after the IPv6 host");
      port = after.substr(1);
      if (port.empty()) bad(url, "empty port");
    }
  } else {
    const std::size_t colon = authority.find(':');
    e.host = checked_host(url, authority.substr(0, colon), false);
    if (colon != std::string_view::npos) {
      port = authority.substr(colon + 1);
      if (port.empty()) bad(url, "empty port");
    }
  }
  if (e.host.empty()) bad(url, "empty host");
  return port;
}

REDLIMIT_INLINE Endpoint parse_tcp(std::string_view url, std::string_view rest, bool tls) {
  Endpoint e;
  e.tls.enabled = tls;
  const std::string_view query = split_query(url, rest);
  const std::size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  Query q;
  if (slash != std::string_view::npos) {
    const std::string_view path = rest.substr(slash + 1);
    if (!path.empty()) {
      e.db = parse_int(url, path, "db", 0, 1 << 20);
      q.given.push_back("db");
    }
  }
  const std::size_t at = authority.rfind('@');
  if (at != std::string_view::npos) {
    parse_userinfo(url, authority.substr(0, at), e, q.given);
    authority = authority.substr(at + 1);
  }
  const std::string_view port = parse_host(url, authority, e);
  if (!port.empty()) e.port = parse_int(url, port, "port", 1, 65535);
  parse_endpoint_query(url, query, e, std::move(q));
  if (e.tls.cert_file.empty() != e.tls.key_file.empty()) {
    bad(url, "tls_cert_file and tls_key_file go together (mutual TLS needs both)");
  }
  return e;
}

}  // namespace url_impl

REDLIMIT_INLINE bool has_scheme(std::string_view url, std::string_view scheme) {
  if (url.size() < scheme.size()) return false;
  for (std::size_t i = 0; i < scheme.size(); ++i) {
    const char c = url[i];
    const char lower = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
    if (lower != scheme[i]) return false;
  }
  return true;
}

REDLIMIT_INLINE Endpoint parse_url(std::string_view url) {
  // hiredis takes the host and path as C strings: a NUL would silently cut them ("evil\0.example.com"
  // connects to "evil"), and no control byte belongs in either.
  if (url_impl::has_control_byte(url)) url_impl::bad(url, "control bytes are not allowed in a URL");
  // Schemes are case-insensitive (RFC 3986): REDIS://host is redis://host.
  if (has_scheme(url, "unix://")) return url_impl::parse_unix(url, url.substr(7));
  if (has_scheme(url, "redis://")) return url_impl::parse_tcp(url, url.substr(8), false);
  // Whether this build can speak TLS is the transport's to say (RedisConnection throws before any
  // I/O when it cannot): the URL itself is valid either way.
  if (has_scheme(url, "rediss://")) return url_impl::parse_tcp(url, url.substr(9), true);
  if (has_scheme(url, "redis-sentinel://") || has_scheme(url, "rediss-sentinel://") ||
      has_scheme(url, "redis-cluster://") || has_scheme(url, "rediss-cluster://")) {
    url_impl::bad(url, "this URL names several servers: RateLimiter::connect takes it, a single connection does not");
  }
  url_impl::bad(url, "scheme must be redis://, rediss:// or unix://");
}

}  // namespace redlimit

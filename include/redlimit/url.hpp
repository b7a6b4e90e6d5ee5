#pragma once
// Where the server is: redis://[:password@]host[:port][/db], redis://user:password@host,
// unix:///path/to.sock[?db=N&password=P]. IPv6 hosts go in brackets: redis://[::1]:6379.
// TLS: rediss://host[:port][/db][?tls_ca_file=...&...] (the parameters are TlsOptions' fields, below;
// docs/connecting.md). Any URL takes ?db=, ?user= and ?password= too, and ?password_env=NAME: the
// password read from the environment variable NAME when the URL is parsed (InvalidArgument naming
// the variable when it is not set). Sentinel: redis-sentinel://[user:password@]host[:port][,host[:port]...]
// /master-name[/db][?sentinel_user=U&sentinel_password=P&...] (SentinelEndpoint, below), and
// rediss-sentinel:// the same over TLS (the tls_* parameters, for the sentinels and the master alike).
#include "redlimit/detail/config.hpp"
#include <string>
#include <string_view>
#include <vector>

namespace redlimit {

// TLS (rediss://), when redlimit is built on hiredis >= 1.0 with hiredis_ssl (RedisConnection::has_tls()
// tells). The server's certificate is verified against the CA file/directory (the system's CAs when
// neither is given), and so is its name: server_name, else the URL's host (a DNS name or an IP).
struct TlsOptions {
  bool enabled = false;              // rediss://
  std::string ca_file;               // tls_ca_file=: PEM bundle of trusted CAs
  std::string ca_dir;                // tls_ca_dir=: OpenSSL hashed directory of CAs
  std::string cert_file;             // tls_cert_file=: client certificate chain (mutual TLS), PEM
  std::string key_file;              // tls_key_file=: its private key, PEM (required with cert_file)
  std::string server_name;           // tls_server_name=: SNI and the name verified (default: the host)
  bool insecure_skip_verify = false;  // tls_insecure_skip_verify=true: no verification. Tests only.
};

struct Endpoint {
  std::string host;         // empty for unix sockets
  int port = 6379;
  std::string unix_path;    // set for unix:// URLs
  std::string username;     // Redis 6 ACL user; empty = default user
  std::string password;     // empty = no AUTH
  int db = 0;
  TlsOptions tls;
};

// redis-sentinel://[user:password@]host1[:26379],host2[:26379]/<master-name>[/db][?query]: the sentinels
// to ask for the master called master_name (docs/connecting.md). The userinfo and ?user=, ?password=,
// ?password_env=, ?db= are the data connection's (the master's); ?sentinel_user=, ?sentinel_password=
// and ?sentinel_password_env= are the sentinels' own (Redis Sentinel has ACLs of its own).
// rediss-sentinel://: the tls_* parameters go to master.tls and to every sentinel's tls alike.
struct SentinelEndpoint {
  std::vector<Endpoint> sentinels;  // host, port (default 26379) and the sentinels' credentials
  std::string master_name;
  Endpoint master;                  // credentials and db of the data connection; no host yet
  // ?sentinel_check_ms=N: how often (at most) a call also asks a sentinel whether the master is
  // still the one in use, so that a failover whose old master stays up (and keeps taking writes
  // that the new master will never see) is followed within about that time. 0 = never.
  int check_interval_ms = 1000;
};

// Throws InvalidArgument naming what is wrong (quoting the URL as redact_url() writes it).
SentinelEndpoint parse_sentinel_url(std::string_view url);

// Throws InvalidArgument naming what is wrong (quoting the URL as redact_url() writes it). The scheme
// is case-insensitive.
Endpoint parse_url(std::string_view url);

// `url` as it may be printed (errors, logs, metrics): the password replaced by "***" (the whole
// userinfo when it has no user, and the values of password=, sentinel_password= and of any query key
// the parsers do not take, such as a misspelled pasword= or Password=), unprintable bytes as \xNN.
// Since a password may hold a raw '&', such a value runs to the first '&' after which the rest of
// the query is parameters the parsers take, or else to the end of the query.
std::string redact_url(std::string_view url);

// True when `url` starts with `scheme` ("redis://", lower case), in any case.
bool has_scheme(std::string_view url, std::string_view scheme);

}  // namespace redlimit

#ifdef REDLIMIT_HEADER_ONLY
#include "redlimit/impl/url-inl.hpp"
#include "redlimit/impl/url_sentinel-inl.hpp"
#endif

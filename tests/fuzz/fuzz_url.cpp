// parse_url, parse_cluster_url and parse_sentinel_url on arbitrary bytes. They must either throw InvalidArgument or
// return an endpoint that makes sense: a TCP endpoint has a host and a port in 1..65535, a unix
// endpoint an absolute path, db is in [0, 2^20], TLS only from rediss://. A parsed endpoint, written
// back as a URL with its user, password and TLS parameters percent-encoded, parses to the same
// endpoint (the decoder loses nothing).
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <string_view>

#include "fuzz_check.hpp"
#include "redlimit/transport/cluster_connection.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/url.hpp"

namespace {

using redlimit::Endpoint;

bool same(const Endpoint& a, const Endpoint& b) {
  const auto& s = a.tls;
  const auto& t = b.tls;
  return a.host == b.host && a.port == b.port && a.unix_path == b.unix_path && a.username == b.username &&
         a.password == b.password && a.db == b.db && s.enabled == t.enabled && s.ca_file == t.ca_file &&
         s.ca_dir == t.ca_dir && s.cert_file == t.cert_file && s.key_file == t.key_file &&
         s.server_name == t.server_name && s.insecure_skip_verify == t.insecure_skip_verify;
}

std::string encode(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
      out += ch;
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    }
  }
  return out;
}

std::string to_url(const Endpoint& e) {
  if (!e.unix_path.empty()) {
    return "unix://" + e.unix_path + "?db=" + std::to_string(e.db) + "&password=" + encode(e.password) +
           "&username=" + encode(e.username);
  }
  std::string url = (e.tls.enabled ? "rediss://" : "redis://") + encode(e.username) + ":" + encode(e.password) + "@";
  const bool bracket = e.host.find(':') != std::string::npos || e.host[0] == '[';
  url += bracket ? "[" + e.host + "]" : e.host;
  url += ":" + std::to_string(e.port) + "/" + std::to_string(e.db);
  if (e.tls.enabled) {
    url += "?tls_insecure_skip_verify=" + std::string(e.tls.insecure_skip_verify ? "true" : "false");
    const std::pair<const char*, const std::string*> fields[] = {
        {"tls_ca_file", &e.tls.ca_file},     {"tls_ca_dir", &e.tls.ca_dir},   {"tls_cert_file", &e.tls.cert_file},
        {"tls_key_file", &e.tls.key_file}, {"tls_server_name", &e.tls.server_name}};
    for (const auto& [name, value] : fields) {
      if (!value->empty()) url += std::string("&") + name + "=" + encode(*value);
    }
  }
  return url;
}

void check_endpoint(std::string_view url, const Endpoint& e, bool cluster) {
  FUZZ_CHECK(e.db >= 0 && e.db <= (1 << 20), "db %d out of range", e.db);
  if (!e.unix_path.empty()) {
    FUZZ_CHECK(!cluster, "a cluster seed is a unix socket");
    FUZZ_CHECK(redlimit::has_scheme(url, "unix://"), "unix endpoint from a non-unix URL");
    FUZZ_CHECK(e.unix_path[0] == '/', "unix path is not absolute");
    FUZZ_CHECK(e.host.empty(), "unix endpoint with a host");
    FUZZ_CHECK(e.port == 0, "unix endpoint with port %d", e.port);
  } else {
    // Schemes are case-insensitive.
    FUZZ_CHECK(redlimit::has_scheme(url, "redis://") || redlimit::has_scheme(url, "rediss://") ||
                   (cluster && (redlimit::has_scheme(url, "redis-cluster://") ||
                                redlimit::has_scheme(url, "rediss-cluster://"))),
               "TCP endpoint from a URL with another scheme");
    FUZZ_CHECK(e.tls.enabled == (redlimit::has_scheme(url, "rediss://") || redlimit::has_scheme(url, "rediss-cluster://")),
               "TLS from another scheme");
    FUZZ_CHECK(e.tls.cert_file.empty() == e.tls.key_file.empty(), "a client certificate without its key");
    FUZZ_CHECK(!e.host.empty(), "empty host");
    FUZZ_CHECK(e.port >= 1 && e.port <= 65535, "port %d out of range", e.port);
    FUZZ_CHECK(e.host.find('/') == std::string::npos, "host holds a '/'");
    FUZZ_CHECK(e.host.find('@') == std::string::npos, "host holds a '@'");
  }
  if (cluster) FUZZ_CHECK(e.db == 0, "cluster seed with db %d", e.db);
  // Round trip through our own rendering.
  const std::string again = to_url(e);
  Endpoint back;
  try {
    back = redlimit::parse_url(again);
  } catch (const redlimit::InvalidArgument& err) {
    FUZZ_CHECK(false, "re-rendered URL rejected: %s", err.what());
  }
  FUZZ_CHECK(same(e, back), "round trip changed the endpoint (re-rendered as %s)", again.c_str());
}

// An error quotes the URL as redact_url writes it: nothing unprintable, whatever the input.
void check_message(const redlimit::InvalidArgument& err) {
  for (const char* p = err.what(); *p != '\0'; ++p) {
    const auto c = static_cast<unsigned char>(*p);
    FUZZ_CHECK(c >= 0x20 && c < 0x7f, "unprintable byte 0x%02x in the message: %s", c, err.what());
  }
}

void one(std::string_view url) {
  try {
    const Endpoint e = redlimit::parse_url(url);
    check_endpoint(url, e, false);
  } catch (const redlimit::InvalidArgument& err) {
    check_message(err);
  }
  try {
    const redlimit::ClusterEndpoint c = redlimit::parse_cluster_url(url);
    FUZZ_CHECK(!c.seeds.empty(), "cluster URL without seeds");
    for (const auto& seed : c.seeds) {
      check_endpoint(url, seed, true);
      FUZZ_CHECK(seed.username == c.seeds[0].username && seed.password == c.seeds[0].password,
                 "seeds with different credentials");
      FUZZ_CHECK(seed.tls.ca_file == c.seeds[0].tls.ca_file && seed.tls.server_name == c.seeds[0].tls.server_name,
                 "seeds with different TLS options");
    }
  } catch (const redlimit::InvalidArgument& err) {
    check_message(err);
  }
  try {
    const redlimit::SentinelEndpoint s = redlimit::parse_sentinel_url(url);
    FUZZ_CHECK(redlimit::has_scheme(url, "redis-sentinel://"), "Sentinel endpoint from another scheme");
    FUZZ_CHECK(!s.sentinels.empty(), "Sentinel URL without sentinels");
    FUZZ_CHECK(!s.master_name.empty(), "Sentinel URL without a master name");
    FUZZ_CHECK(s.master.db >= 0 && s.master.db <= (1 << 20), "db %d out of range", s.master.db);
    FUZZ_CHECK(s.master.host.empty() && !s.master.tls.enabled, "a Sentinel master with a host or TLS");
    for (const auto& sentinel : s.sentinels) {
      FUZZ_CHECK(!sentinel.host.empty(), "empty sentinel host");
      FUZZ_CHECK(sentinel.port >= 1 && sentinel.port <= 65535, "sentinel port %d out of range", sentinel.port);
      FUZZ_CHECK(sentinel.host.find('/') == std::string::npos, "sentinel host holds a '/'");
      FUZZ_CHECK(sentinel.db == 0 && !sentinel.tls.enabled, "a sentinel with a db or TLS");
    }
  } catch (const redlimit::InvalidArgument& err) {
    check_message(err);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  one(input);
  // Give the parsers' insides a chance without the fuzzer having to guess a scheme first.
  if (input.find("://") == std::string_view::npos) {
    one("redis://" + std::string(input));
    one("unix://" + std::string(input));
    one("redis-cluster://" + std::string(input));
    one("rediss-cluster://" + std::string(input));
    one("redis-sentinel://" + std::string(input));
  }
  return 0;
}

// The parts of the cluster router that need no connection: a redis-cluster:// or rediss-cluster://
// URL into its seed endpoints, and the hash slot a command is routed by (cluster_connection.cpp
// routes and sends).
#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "redlimit/detail/keys.hpp"
#include "redlimit/detail/message.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/transport/cluster_connection.hpp"

namespace redlimit {

namespace {

std::string upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

[[noreturn]] void bad(std::string_view url, const std::string& why) {
  throw InvalidArgument(fmt::format("URL \"{}\": {}", redact_url(url), why));
}

// One seed, parsed by parse_url as the redis:// or rediss:// URL `seed_url` (so a cluster takes
// exactly what one server takes); its errors quote `url`, the URL the caller wrote.
Endpoint parse_seed(std::string_view url, const std::string& seed_url) {
  try {
    return parse_url(seed_url);
  } catch (const InvalidArgument& e) {
    std::string why = e.what();
    for (const std::string& prefix :
         {std::string("redlimit: invalid argument: "), fmt::format("URL \"{}\": ", redact_url(seed_url))}) {
      if (why.compare(0, prefix.size(), prefix) == 0) why.erase(0, prefix.size());
    }
    bad(url, why);
  }
}

// tls_* parameters belong to rediss-cluster:// (parse_url would point at rediss:// instead).
void refuse_tls_parameters(std::string_view url, std::string_view query) {
  while (!query.empty()) {
    const std::size_t amp = query.find('&');
    const std::string_view name = query.substr(0, std::min(amp, query.find('=')));
    if (name.substr(0, 4) == "tls_") {
      bad(url, detail::message("{} needs a rediss-cluster:// URL", detail::printable(name)));
    }
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
}

}  // namespace

ClusterEndpoint parse_cluster_url(std::string_view url) {
  // Case-insensitive, like every scheme.
  constexpr std::string_view kPlain = "redis-cluster://", kTls = "rediss-cluster://";
  const bool tls = has_scheme(url, kTls);
  if (!tls && !has_scheme(url, kPlain)) bad(url, "scheme must be redis-cluster:// or rediss-cluster://");
  std::string_view rest = url.substr((tls ? kTls : kPlain).size());
  std::string_view query;
  if (const std::size_t q = rest.find('?'); q != std::string_view::npos) {
    if (rest.find('@', q) != std::string_view::npos) {
      bad(url, "'@' after '?': percent-encode a '?' in a password as %3F and an '@' in a query value as %40");
    }
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  if (!tls) refuse_tls_parameters(url, query);
  std::string userinfo;
  if (const std::size_t at = rest.rfind('@'); at != std::string_view::npos) {
    userinfo = std::string(rest.substr(0, at)) + "@";
    rest = rest.substr(at + 1);
  }
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (rest.find('/') != std::string_view::npos) bad(url, "a cluster has only database 0; no /db part");
  const std::string scheme = tls ? "rediss://" : "redis://";
  const std::string tail = query.empty() ? std::string() : "?" + std::string(query);
  ClusterEndpoint out;
  while (true) {
    const std::size_t comma = rest.find(',');
    const std::string_view node = rest.substr(0, comma);
    if (node.empty()) bad(url, "empty seed node");
    out.seeds.push_back(parse_seed(url, scheme + userinfo + std::string(node) + tail));
    if (out.seeds.back().db != 0) bad(url, "a cluster has only database 0");
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return out;
}

bool to_every_master(const std::vector<std::string>& argv) {
  if (argv.size() < 2) return false;
  const std::string verb = upper(argv[0]);
  return (verb == "FUNCTION" || verb == "SCRIPT") && upper(argv[1]) == "LOAD";
}

bool replaces_every_master_reply(const Reply& next, const Reply& kept, bool kept_any) {
  return !kept_any || (!kept.is_error() && next.is_error());
}

int command_slot(const std::vector<std::string>& argv) {
  if (argv.empty()) return -1;
  const std::string verb = upper(argv[0]);
  if (verb == "EVAL" || verb == "EVALSHA" || verb == "FCALL" || verb == "FCALL_RO") {
    if (argv.size() < 4 || argv[2] == "0") return -1;
    return detail::key_slot(argv[3]);
  }
  if (verb == "PING" || verb == "INFO" || verb == "SCRIPT" || verb == "FUNCTION" || verb == "CLUSTER" ||
      argv.size() < 2) {
    return -1;
  }
  return detail::key_slot(argv[1]);
}

}  // namespace redlimit

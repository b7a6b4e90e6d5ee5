// The parts of the cluster router that need no connection: a redis-cluster:// URL into its seed
// endpoints, and the hash slot a command is routed by (cluster_connection.cpp routes and sends).
#include <fmt/format.h>

#include <cctype>

#include "redlimit/detail/keys.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/transport/cluster_connection.hpp"

namespace redlimit {

ClusterEndpoint parse_cluster_url(std::string_view url) {
  constexpr std::string_view kScheme = "redis-cluster://";
  if (!has_scheme(url, kScheme)) {  // case-insensitive, like every scheme
    throw InvalidArgument(fmt::format("URL \"{}\": scheme must be redis-cluster://", redact_url(url)));
  }
  std::string_view rest = url.substr(kScheme.size());
  std::string userinfo;
  const std::size_t at = rest.rfind('@');
  if (at != std::string_view::npos) {
    userinfo = std::string(rest.substr(0, at)) + "@";
    rest = rest.substr(at + 1);
  }
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (rest.find('/') != std::string_view::npos) {
    throw InvalidArgument(fmt::format("URL \"{}\": a cluster has only database 0; no /db part", redact_url(url)));
  }
  if (rest.find('?') != std::string_view::npos) {  // each seed would take it as its own
    throw InvalidArgument(fmt::format("URL \"{}\": a cluster URL takes no query parameters", redact_url(url)));
  }
  ClusterEndpoint out;
  while (true) {
    const std::size_t comma = rest.find(',');
    const std::string_view node = rest.substr(0, comma);
    if (node.empty()) throw InvalidArgument(fmt::format("URL \"{}\": empty seed node", redact_url(url)));
    out.seeds.push_back(parse_url("redis://" + userinfo + std::string(node)));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return out;
}

int command_slot(const std::vector<std::string>& argv) {
  if (argv.empty()) return -1;
  std::string verb = argv[0];
  for (auto& c : verb) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (verb == "EVAL" || verb == "EVALSHA") {
    if (argv.size() < 4 || argv[2] == "0") return -1;
    return detail::key_slot(argv[3]);
  }
  if (verb == "PING" || verb == "INFO" || verb == "SCRIPT" || verb == "CLUSTER" || argv.size() < 2) return -1;
  return detail::key_slot(argv[1]);
}

}  // namespace redlimit

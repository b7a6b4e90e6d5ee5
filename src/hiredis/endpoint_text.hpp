#pragma once
// How the transports name a server: "host:port", or the unix socket's path. One spelling for the
// messages of the sync connection (redis_connection.cpp) and the async one (async_*.cpp), so that a
// log or a test matches the same text whichever transport failed, and for the names a cluster's
// nodes and a sentinel's answers go by (cluster_connection.cpp, cluster_slot_map.cpp,
// async_cluster.cpp: the masters' maps; sentinel_discovery.cpp), all of them TCP endpoints.
#include <fmt/format.h>

#include <string>

#include "redlimit/url.hpp"

namespace redlimit::hiredis_detail {

inline std::string describe(const Endpoint& e) {
  return e.unix_path.empty() ? fmt::format("{}:{}", e.host, e.port) : e.unix_path;
}

}  // namespace redlimit::hiredis_detail

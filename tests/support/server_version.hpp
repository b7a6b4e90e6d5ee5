#pragma once
// The version of a server binary the harness starts (tests/support/redis_server.cpp,
// tests/sentinel/deployment.cpp, tests/cluster/cluster_env.cpp): what it may be given on its
// command line depends on it.
#include <string>

namespace redlimit_test {

// What a redis-server (or valkey-server) binary says it is on its --version line ("Redis server
// v=6.0.16 ...": "6.0.16"), "" when it says nothing of the kind. Asked once a binary.
std::string server_version(const std::string& binary);

// Its major version (6 for "6.0.16"), 0 when it says none. `enable-debug-command` (7.0) is an
// unknown directive to an older server, which allows DEBUG anyway.
int server_major_version(const std::string& binary);

}  // namespace redlimit_test

#include "support/server_version.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

namespace redlimit_test {

std::string server_version(const std::string& binary) {
  static std::mutex mutex;
  static std::map<std::string, std::string> known;
  std::lock_guard<std::mutex> lock(mutex);
  if (const auto it = known.find(binary); it != known.end()) return it->second;
  std::string version;
  if (FILE* p = ::popen(("'" + binary + "' --version 2>/dev/null").c_str(), "r")) {
    char line[256] = {};
    if (std::fgets(line, sizeof line, p) != nullptr) {
      if (const char* v = std::strstr(line, " v=")) version.assign(v + 3, std::strcspn(v + 3, " \n"));
    }
    ::pclose(p);
  }
  known[binary] = version;
  return version;
}

int server_major_version(const std::string& binary) { return std::atoi(server_version(binary).c_str()); }

}  // namespace redlimit_test

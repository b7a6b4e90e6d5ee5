// Records the golden traces (tests/golden/golden.hpp) from a real Redis:
//   redlimit_record_golden <redis-url> <output-dir>
// scripts/record_golden.sh starts a throwaway server for it and writes tests/golden/.
#include <fstream>
#include <iostream>
#include <memory>

#include "golden/golden.hpp"
#include "redlimit/redlimit.hpp"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: redlimit_record_golden <redis-url> <output-dir>\n";
    return 2;
  }
  try {
    auto redis = std::make_shared<redlimit::RedisConnection>(redlimit::parse_url(argv[1]), std::chrono::milliseconds(5000),
                                                             std::chrono::milliseconds(30000));
    for (const auto& name : redlimit_golden::scenario_names()) {
      const redlimit_golden::Trace trace = redlimit_golden::record(name, redis);
      const std::string path = std::string(argv[2]) + "/" + name + ".trace";
      std::ofstream out(path, std::ios::binary);
      out << redlimit_golden::format(trace);
      if (!out) throw std::runtime_error("cannot write " + path);
      std::cout << path << ": " << trace.commands.size() << " commands\n";
    }
  } catch (const std::exception& e) {
    std::cerr << "redlimit_record_golden: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

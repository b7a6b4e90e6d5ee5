// One redis-server for the whole integration suite: a gtest global environment starts it before the
// first test and stops it after the last. Tests reach it through redlimit_test::shared_server().
#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>

#include "support/redis_server.hpp"

namespace redlimit_test {

namespace {

std::unique_ptr<RedisServer>& server_slot() {
  static std::unique_ptr<RedisServer> server;
  return server;
}

std::string& start_error() {
  static std::string error;
  return error;
}

class SharedServerEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    try {
      server_slot() = std::make_unique<RedisServer>();
    } catch (const std::exception& e) {
      start_error() = e.what();
      // A fatal failure here makes gtest skip every test and the binary exit non-zero.
      GTEST_FAIL() << "cannot start the shared redis-server: " << e.what();
    }
  }
  void TearDown() override { server_slot().reset(); }
};

// Registered from a static initializer, before gtest_main's main() runs the tests.
[[maybe_unused]] const bool kRegistered =
    (::testing::AddGlobalTestEnvironment(new SharedServerEnvironment), true);

}  // namespace

RedisServer& shared_server() {
  if (!server_slot()) {
    throw std::runtime_error("the shared redis-server is not running: " +
                             (start_error().empty() ? std::string("environment not set up") : start_error()));
  }
  return *server_slot();
}

}  // namespace redlimit_test

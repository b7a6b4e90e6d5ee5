#pragma once
// The certificates of one TLS test run (tests/tls/make_certs.sh), in a private directory removed at
// the end, and the check both TLS suites make of a refused connection. REDLIMIT_TLS_MAKE_CERTS is the
// script's path (tests/CMakeLists.txt).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "redlimit/redlimit.hpp"

namespace redlimit_test {

class Certificates {
 public:
  Certificates() {
    const char* base = std::getenv("REDLIMIT_TEST_TMPDIR");
    std::string tmpl = std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/redlimit-tls-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp " + tmpl);
    dir_ = tmpl;
    const std::string cmd = std::string("bash ") + REDLIMIT_TLS_MAKE_CERTS + " " + dir_;
    if (std::system(cmd.c_str()) != 0) throw std::runtime_error("failed: " + cmd);
  }
  ~Certificates() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  Certificates(const Certificates&) = delete;
  Certificates& operator=(const Certificates&) = delete;
  std::string operator()(const std::string& name) const { return dir_ + "/" + name; }

 private:
  std::string dir_;
};

// The message of the TlsError that connecting to `url` under `policy` throws (empty, with a test
// failure, if it connects or throws anything else): a refused certificate is never a decision.
inline std::string tls_error(const std::string& url, redlimit::OnFailure policy = redlimit::OnFailure::raise) {
  redlimit::Options options;
  options.on_failure = policy;
  try {
    redlimit::RateLimiter::connect(url, options);
    ADD_FAILURE() << "connected to " << url;
  } catch (const redlimit::TlsError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a TlsError: " << e.what();
  }
  return {};
}

}  // namespace redlimit_test

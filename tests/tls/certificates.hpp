#pragma once
// The certificates of one TLS test run (tests/tls/make_certs.sh), in a private directory removed at
// the end. REDLIMIT_TLS_MAKE_CERTS is the script's path (tests/CMakeLists.txt).
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

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

}  // namespace redlimit_test

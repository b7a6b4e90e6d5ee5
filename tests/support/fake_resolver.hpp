#pragma once
// Resolvers of a test's own, put in getaddrinfo's place (src/hiredis/name_lookup.hpp,
// set_resolver_for_tests): a test cannot make this machine's resolver hang or fail without a DNS
// server of its own on port 53 named in /etc/resolv.conf. The binary that includes this needs src/
// on its include path.
//
// FakeResolver installs one for its life: counting (asks getaddrinfo, and counts), unknown (every
// name is unknown: EAI_NONAME) or hanging (waits until the FakeResolver goes, or kHang at most, then
// EAI_AGAIN). Its destructor releases a hung lookup, waits for it to return (its thread would
// otherwise count the next test's calls), and puts getaddrinfo back. One at a time.
#include <netdb.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "hiredis/name_lookup.hpp"

namespace redlimit_test {

class FakeResolver {
 public:
  enum class Kind { counting, unknown, hanging };
  static constexpr std::chrono::seconds kHang{10};

  explicit FakeResolver(Kind kind) {
    state().calls = 0;
    {
      std::lock_guard<std::mutex> lock(state().mutex);
      state().release = false;
    }
    use(kind);
  }
  ~FakeResolver() {
    {
      std::lock_guard<std::mutex> lock(state().mutex);
      state().release = true;
    }
    state().cv.notify_all();
    const auto t0 = std::chrono::steady_clock::now();
    while (state().hanging.load() > 0 && std::chrono::steady_clock::now() - t0 < kHang) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the thread's last steps after it returned
    redlimit::hiredis_detail::set_resolver_for_tests(nullptr);
  }
  FakeResolver(const FakeResolver&) = delete;
  FakeResolver& operator=(const FakeResolver&) = delete;

  // Another kind from now on (a lookup already hung stays hung until the destructor).
  void use(Kind kind) {
    redlimit::hiredis_detail::set_resolver_for_tests(kind == Kind::counting  ? &counting
                                                     : kind == Kind::unknown ? &unknown
                                                                             : &hanging);
  }
  // Lookups asked of this resolver so far, of any kind.
  int calls() const { return state().calls.load(); }
  // Lookups inside `hanging` now.
  int hung() const { return state().hanging.load(); }

 private:
  struct State {
    std::atomic<int> calls{0};
    std::atomic<int> hanging{0};
    std::mutex mutex;
    std::condition_variable cv;
    bool release = false;
  };
  static State& state() {
    static State s;
    return s;
  }
  static int counting(const char* host, const char* service, const addrinfo* hints, addrinfo** res) {
    ++state().calls;
    return ::getaddrinfo(host, service, hints, res);
  }
  static int unknown(const char*, const char*, const addrinfo*, addrinfo** res) {
    ++state().calls;
    *res = nullptr;
    return EAI_NONAME;
  }
  static int hanging(const char*, const char*, const addrinfo*, addrinfo** res) {
    ++state().calls;
    ++state().hanging;
    {
      std::unique_lock<std::mutex> lock(state().mutex);
      state().cv.wait_for(lock, kHang, [] { return state().release; });
    }
    *res = nullptr;
    --state().hanging;
    return EAI_AGAIN;
  }
};

}  // namespace redlimit_test

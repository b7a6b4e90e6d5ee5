// See name_lookup.hpp.
#include "name_lookup.hpp"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <map>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace redlimit::hiredis_detail {

using Clock = std::chrono::steady_clock;

// One lookup: its thread writes `rc` and `result`, then sets `ended` and makes `done` readable; every
// connect that waits on it reads them after that.
struct Lookup {
  std::string host, service, key;
  int done[2] = {-1, -1};  // a byte is written when the lookup ends, and never read: readable for all
  std::atomic<bool> ended{false};
  int rc = 0;
  addrinfo* result = nullptr;
  std::mutex mutex;                         // `then` and, for look_up_then, `ended`
  std::vector<std::function<void()>> then;  // look_up_then's callbacks, run by the thread at its end

  Lookup(std::string h, std::string s, std::string k) : host(std::move(h)), service(std::move(s)), key(std::move(k)) {}
  ~Lookup() {
    if (result != nullptr) ::freeaddrinfo(result);
    for (const int fd : done) {
      if (fd >= 0) ::close(fd);
    }
  }
  Lookup(const Lookup&) = delete;
  Lookup& operator=(const Lookup&) = delete;
};

namespace {

std::atomic<ResolveFn> g_resolver{nullptr};

addrinfo tcp_hints(int flags) {
  addrinfo h{};
  h.ai_family = AF_UNSPEC;
  h.ai_socktype = SOCK_STREAM;
  h.ai_flags = flags;
  return h;
}

// The lookups in flight, by host and port. Never destroyed: a lookup's thread may still end after
// main() has returned, and takes itself out of here.
struct InFlight {
  std::mutex mutex;
  std::map<std::string, std::weak_ptr<Lookup>> lookups;
};
InFlight& in_flight() {
  static auto* registry = new InFlight;
  return *registry;
}

// The resolver: getaddrinfo, or a test's (set_resolver_for_tests).
int resolve(const std::string& host, const std::string& service, addrinfo** result) {
  const ResolveFn fn = g_resolver.load();
  const addrinfo hints = tcp_hints(0);
  return fn != nullptr ? fn(host.c_str(), service.c_str(), &hints, result)
                       : ::getaddrinfo(host.c_str(), service.c_str(), &hints, result);
}

std::shared_ptr<const addrinfo> owned(addrinfo* list) {
  return std::shared_ptr<const addrinfo>(list, [](const addrinfo* a) { ::freeaddrinfo(const_cast<addrinfo*>(a)); });
}

void run(const std::shared_ptr<Lookup>& l) {
  l->rc = resolve(l->host, l->service, &l->result);
  {
    InFlight& r = in_flight();
    std::lock_guard<std::mutex> lock(r.mutex);
    const auto it = r.lookups.find(l->key);
    if (it != r.lookups.end() && it->second.lock() == l) r.lookups.erase(it);
  }
  std::vector<std::function<void()>> then;
  {
    std::lock_guard<std::mutex> lock(l->mutex);
    l->ended.store(true, std::memory_order_release);
    then.swap(l->then);
  }
  const char byte = 0;
  if (::write(l->done[1], &byte, 1) < 0) {
    // Cannot fail on an empty pipe; `ended` is set either way, and a waiter's poll ends by its limit.
  }
  for (const auto& f : then) f();
}

// Starts a lookup's thread with every signal blocked (it inherits the mask): a process's handlers
// and its sigwait() threads never see a signal land on it. False when no thread could be started.
bool start(const std::shared_ptr<Lookup>& l) {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  bool started = true;
  try {
    std::thread([l] { run(l); }).detach();
  } catch (const std::system_error&) {
    started = false;
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return started;
}

// The lookup of `host` and `service` in flight, joined, or a new one started; null when none could
// be (no pipe or thread left), and the caller resolves on its own thread.
std::shared_ptr<Lookup> lookup_of(const std::string& host, const std::string& service) {
  InFlight& r = in_flight();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::string key = host + '\n' + service;  // the registry's key: no host holds a line break
  if (const auto it = r.lookups.find(key); it != r.lookups.end()) {
    if (auto joined = it->second.lock()) return joined;  // (a lookup's thread holds it until it ends)
  }
  auto l = std::make_shared<Lookup>(host, service, std::move(key));
  if (::pipe2(l->done, O_CLOEXEC | O_NONBLOCK) != 0 || !start(l)) return nullptr;
  r.lookups[l->key] = l;
  return l;
}

// An ended lookup's outcome.
LookupResult result_of(const std::shared_ptr<Lookup>& l) {
  LookupResult r;
  if (l->rc != 0) {
    r.why = ::gai_strerror(l->rc);
    return r;
  }
  r.end = LookupEnd::found;
  r.addresses = std::shared_ptr<const addrinfo>(l, l->result);  // keeps the lookup, and its result, alive
  return r;
}

LookupEnd wait_for(const Lookup& l, int wake_fd, Clock::time_point until, bool bounded) {
  for (;;) {
    if (l.ended.load(std::memory_order_acquire)) return LookupEnd::found;
    int wait_ms = -1;
    if (!poll_ms_left(until, bounded, wait_ms)) return LookupEnd::timed_out;
    pollfd fds[2] = {{l.done[0], POLLIN, 0}, {wake_fd, POLLIN, 0}};
    const int ready = ::poll(fds, wake_fd >= 0 ? 2 : 1, wait_ms);
    if (ready < 0 && errno != EINTR) return LookupEnd::failed;
    if (ready > 0 && wake_fd >= 0 && fds[1].revents != 0) return LookupEnd::stopped;
  }
}

}  // namespace

bool poll_ms_left(Clock::time_point until, bool bounded, int& wait_ms) {
  wait_ms = -1;
  if (!bounded) return true;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
  if (left <= 0) return false;
  wait_ms = static_cast<int>(std::min<long long>(left + 1, 1 << 30));
  return true;
}

bool numeric_address(const std::string& host, int port, std::shared_ptr<const addrinfo>& out) {
  // Read without asking any resolver (AI_NUMERICHOST): it never blocks.
  const addrinfo numeric_hints = tcp_hints(AI_NUMERICHOST | AI_NUMERICSERV);
  addrinfo* numeric = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &numeric_hints, &numeric) != 0) return false;
  out = owned(numeric);
  return true;
}

void look_up_then(const std::string& host, int port, std::function<void(LookupResult)> done) {
  const std::shared_ptr<Lookup> l = lookup_of(host, std::to_string(port));
  if (!l) {
    LookupResult r;
    r.why = "no thread could be started to resolve the name";
    done(std::move(r));
    return;
  }
  std::function<void()> call = [l, done = std::move(done)] { done(result_of(l)); };
  {
    std::lock_guard<std::mutex> lock(l->mutex);
    if (!l->ended.load(std::memory_order_acquire)) {
      l->then.push_back(std::move(call));
      return;
    }
  }
  call();
}

LookupEnd look_up(const std::string& host, int port, Clock::time_point until, bool bounded, int wake_fd,
                  std::shared_ptr<const addrinfo>& out, std::string& why) {
  const std::string service = std::to_string(port);
  if (numeric_address(host, port, out)) return LookupEnd::found;
  const std::shared_ptr<Lookup> l = lookup_of(host, service);
  if (!l) {  // no thread to spare: resolved here, as hiredis would (unbounded)
    addrinfo* found = nullptr;
    if (const int rc = resolve(host, service, &found); rc != 0) {
      why = ::gai_strerror(rc);
      return LookupEnd::failed;
    }
    out = owned(found);
    return LookupEnd::found;
  }
  const LookupEnd end = wait_for(*l, wake_fd, until, bounded);
  if (end == LookupEnd::timed_out) why = kTimedOut;
  if (end == LookupEnd::stopped) why = "stopped";
  if (end == LookupEnd::failed) why = "waiting for the name's lookup failed";
  if (end != LookupEnd::found) return end;
  LookupResult r = result_of(l);
  out = std::move(r.addresses);
  why = std::move(r.why);
  return r.end;
}

void set_resolver_for_tests(ResolveFn fn) { g_resolver.store(fn); }

}  // namespace redlimit::hiredis_detail

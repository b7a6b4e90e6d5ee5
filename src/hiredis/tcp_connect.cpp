// See tcp_connect.hpp.
#include "tcp_connect.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

#include "endpoint_text.hpp"
#include "name_lookup.hpp"
#include "redlimit/errors.hpp"

namespace redlimit::hiredis_detail {

namespace {

using Clock = std::chrono::steady_clock;

enum class Outcome { connected, failed, timed_out, stopped };

// Waits for a non-blocking connect on `fd` to end, or `wake_fd`, or `until`; then SO_ERROR says how
// the connect ended.
Outcome finish(int fd, int wake_fd, Clock::time_point until, bool bounded, int& error) {
  for (;;) {
    int wait_ms = -1;
    if (!poll_ms_left(until, bounded, wait_ms)) return Outcome::timed_out;
    pollfd fds[2] = {{fd, POLLOUT, 0}, {wake_fd, POLLIN, 0}};
    const int ready = ::poll(fds, wake_fd >= 0 ? 2 : 1, wait_ms);
    if (ready < 0) {
      if (errno == EINTR) continue;
      error = errno;
      return Outcome::failed;
    }
    if (ready == 0) continue;  // the loop's head decides whether the limit has passed
    if (wake_fd >= 0 && fds[1].revents != 0) return Outcome::stopped;
    socklen_t len = sizeof error;
    if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) != 0) error = errno;
    return error == 0 ? Outcome::connected : Outcome::failed;
  }
}

// One address: a connected, blocking socket, or -1 (`error` or the outcome says why).
int connect_one(const addrinfo& a, int wake_fd, Clock::time_point until, bool bounded, int& error, Outcome& out) {
  const int fd = ::socket(a.ai_family, a.ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a.ai_protocol);
  if (fd < 0) {
    error = errno;
    out = Outcome::failed;
    return -1;
  }
  out = ::connect(fd, a.ai_addr, a.ai_addrlen) == 0 ? Outcome::connected
        : errno == EINPROGRESS                      ? finish(fd, wake_fd, until, bounded, error)
                                                    : (error = errno, Outcome::failed);
  const int flags = ::fcntl(fd, F_GETFL);
  if (out == Outcome::connected && (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0)) {
    error = errno;
    out = Outcome::failed;
  }
  if (out != Outcome::connected) {
    ::close(fd);
    return -1;
  }
  const int on = 1;  // as hiredis sets it: a command is one small write, never held back
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
  return fd;
}

// The connected socket, or -1 with `why` (and `timed_out` when the limit ended it).
int connect_tcp(const std::string& host, int port, std::chrono::microseconds limit, int wake_fd, std::string& why,
                bool& timed_out) {
  timed_out = false;
  const bool bounded = limit.count() > 0;
  const Clock::time_point until = Clock::now() + limit;
  std::shared_ptr<const addrinfo> found;
  switch (look_up(host, port, until, bounded, wake_fd, found, why)) {
    case LookupEnd::found:
      break;
    case LookupEnd::timed_out:
      timed_out = true;
      return -1;
    default:
      return -1;
  }
  int error = 0;
  for (const addrinfo* a = found.get(); a != nullptr; a = a->ai_next) {
    Outcome out = Outcome::failed;
    const int fd = connect_one(*a, wake_fd, until, bounded, error, out);
    if (fd >= 0) return fd;
    if (out == Outcome::stopped) {
      why = "stopped";
      return -1;
    }
    if (out == Outcome::timed_out) {
      why = "timed out";
      timed_out = true;
      return -1;
    }
  }
  why = error != 0 ? std::strerror(error) : "no address";
  return -1;
}

}  // namespace

redisAsyncContext* async_connect_context(const Endpoint& endpoint, const addrinfo* addresses) {
  redisAsyncContext* raw = nullptr;
  bool tried = false;
  for (const addrinfo* a = addresses; a != nullptr; a = a->ai_next) {
    char text[NI_MAXHOST];
    if (::getnameinfo(a->ai_addr, a->ai_addrlen, text, sizeof text, nullptr, 0, NI_NUMERICHOST) != 0) continue;
    if (raw != nullptr) redisAsyncFree(raw);  // the last address's failure is the one reported
    tried = true;
    raw = redisAsyncConnect(text, endpoint.port);  // a numeric address: hiredis looks nothing up
    if (raw == nullptr || raw->err == 0) break;
  }
  if (!tried) throw ConnectionError(fmt::format("connecting to {}: no address", describe(endpoint)));
  return raw;
}

redisContext* connect_context(const Endpoint& endpoint, std::chrono::microseconds limit, int wake_fd) {
  std::string why;
  bool timed_out = false;
  const int fd = connect_tcp(endpoint.host, endpoint.port, limit, wake_fd, why, timed_out);
  if (fd < 0) {
    const std::string what = fmt::format("connecting to {}: {}", describe(endpoint), why);
    if (timed_out) throw TimeoutError(what);
    throw ConnectionError(what);
  }
  redisContext* c = redisConnectFd(fd);  // owns the socket from here, closed with the context
  if (c == nullptr) {
    ::close(fd);
    throw ConnectionError(fmt::format("cannot allocate a connection to {}", describe(endpoint)));
  }
  return c;
}

}  // namespace redlimit::hiredis_detail

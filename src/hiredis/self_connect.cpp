// See self_connect.hpp.
#include "self_connect.hpp"

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>

namespace redlimit::hiredis_detail {

bool connected_to_itself(int fd) noexcept {
  sockaddr_storage local{}, peer{};
  socklen_t local_len = sizeof(local), peer_len = sizeof(peer);
  if (fd < 0 || ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0 ||
      ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) {
    return false;
  }
  if (local.ss_family != peer.ss_family) return false;
  if (local.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(local);
    const auto& b = reinterpret_cast<const sockaddr_in&>(peer);
    return a.sin_port == b.sin_port && a.sin_addr.s_addr == b.sin_addr.s_addr;
  }
  if (local.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(local);
    const auto& b = reinterpret_cast<const sockaddr_in6&>(peer);
    return a.sin6_port == b.sin6_port && std::memcmp(&a.sin6_addr, &b.sin6_addr, sizeof(a.sin6_addr)) == 0;
  }
  return false;  // a unix socket cannot reach itself
}

std::string reached_itself(const std::string& where) {
  return "connecting to " + where + ": the connection reached itself (nothing listens there)";
}

}  // namespace redlimit::hiredis_detail

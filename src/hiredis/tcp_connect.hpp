#pragma once
// A TCP connect that another thread can end, for the connections of an Interrupt (interrupt.hpp:
// the Sentinel listener's, an async client's search): their owner, when it closes, must not wait out
// connect_timeout for a sentinel whose host never answers a SYN (down, or behind a firewall that
// drops). hiredis's own connect (redisConnectWithTimeout) waits on a socket no other thread can see;
// this one waits on the socket and a wake pipe together, and hands the connected socket to hiredis
// (redisConnectFd).
#include <chrono>

#include "redlimit/url.hpp"

struct redisContext;

namespace redlimit::hiredis_detail {

// A blocking hiredis context connected to the endpoint's host and port, trying each address the
// name resolves to in turn (as hiredis does), all within `limit` (0: no limit); its socket has
// TCP_NODELAY and close-on-exec. Throws ConnectionError when it could not connect (the system's
// reason for the last address, or "stopped": `wake_fd` became readable first) or allocate, and
// TimeoutError when the limit passed. Resolving the name is not interruptible (getaddrinfo blocks).
redisContext* connect_context(const Endpoint& endpoint, std::chrono::microseconds limit, int wake_fd);

}  // namespace redlimit::hiredis_detail

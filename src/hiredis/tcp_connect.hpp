#pragma once
// A TCP connect that another thread can end, for the connections of an Interrupt (interrupt.hpp:
// the Sentinel listener's, an async client's search): their owner, when it closes, must not wait out
// connect_timeout for a sentinel whose host never answers a SYN (down, or behind a firewall that
// drops). hiredis's own connect (redisConnectWithTimeout) waits on a socket no other thread can see;
// this one waits on the socket and a wake pipe together, and the caller hands the connected socket
// to hiredis (redisConnectFd).
#include <chrono>
#include <string>

namespace redlimit::hiredis_detail {

// Connects to host:port, trying each address the name resolves to in turn (as hiredis does), all
// within `limit` (0: no limit), and returns the connected socket: blocking, TCP_NODELAY,
// close-on-exec. -1 when it could not; `why` then says why (the system's reason for the last
// address, "timed out", or "stopped": `wake_fd` became readable first) and `timed_out` whether the
// limit ended it. Resolving the name is not interruptible (getaddrinfo blocks).
int connect_tcp(const std::string& host, int port, std::chrono::microseconds limit, int wake_fd, std::string& why,
                bool& timed_out);

}  // namespace redlimit::hiredis_detail

#pragma once
// redlimit's TCP connect, for every blocking connection (RedisConnection): it resolves the host
// name within the connect's time (name_lookup.hpp), where hiredis's own connect
// (redisConnectWithTimeout) waits for getaddrinfo however long the resolver takes, and it can be
// ended by another thread, for the connections of an Interrupt (interrupt.hpp: the Sentinel
// listener's, an async client's search), whose owner, when it closes, must not wait out
// connect_timeout for a sentinel whose host never answers a SYN (down, or behind a firewall that
// drops). It waits on the socket and a wake pipe together, and hands the connected socket to hiredis
// (redisConnectFd).
#include <chrono>

#include "redlimit/url.hpp"

struct redisContext;
struct redisAsyncContext;
struct addrinfo;

namespace redlimit::hiredis_detail {

// A blocking hiredis context connected to the endpoint's host and port, trying each address the
// name resolves to in turn (as hiredis does), all within `limit` (0: no limit); its socket has
// TCP_NODELAY and close-on-exec. Throws ConnectionError when it could not connect (the system's
// reason for the last address, or "stopped": `wake_fd` became readable first) or allocate, and
// TimeoutError when the limit passed, whether resolving the name or connecting. `wake_fd` < 0: none.
redisContext* connect_context(const Endpoint& endpoint, std::chrono::microseconds limit, int wake_fd);

// A hiredis async context whose connect has begun (non-blocking) to `addresses` (the endpoint's
// host looked up already, off the event loop: async_lookup.cpp; hiredis's redisAsyncConnect would
// resolve the name on the loop's thread for as long as the resolver takes), tried in turn until
// one's connect begins, as hiredis does. A context that could not begin carries its `err`; throws
// ConnectionError when there is no address to try.
redisAsyncContext* async_connect_context(const Endpoint& endpoint, const addrinfo* addresses);

}  // namespace redlimit::hiredis_detail

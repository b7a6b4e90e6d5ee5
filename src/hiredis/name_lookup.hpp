#pragma once
// Resolving a host name within a connect's time. getaddrinfo() blocks for as long as the system's
// resolver takes: with a DNS server that does not answer, glibc's defaults (5 s, 2 attempts, each
// server in turn) hold a connect 10 s or more, however short connect_timeout or the call's deadline.
// Here a name is looked up on a thread of its own while the connecting thread waits for it with a
// limit, and for a wake pipe (interrupt.hpp); when either ends the wait first, the connect fails
// (TimeoutError, or "stopped") and the lookup finishes in the background and is then dropped.
//
// A numeric address (127.0.0.1, ::1) is read at once, with no thread. Lookups of one host and port
// that overlap share one thread: while a resolver hangs, connects that retry (a call each, a
// pool's connections, a cluster's nodes) wait on the lookup in flight rather than start a thread
// each. A result is never kept past its lookup: the next connect asks again (a name that moves to
// another address, as a managed Redis's does after a failover, is followed at once).
#include <netdb.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

namespace redlimit::hiredis_detail {

enum class LookupEnd { found, failed, timed_out, stopped };
// The reason a lookup that outlasted its time gives.
inline constexpr const char* kTimedOut = "resolving the name timed out";

// Resolves `host` for a TCP connect to `port` by `until` (when `bounded`), ending early when
// `wake_fd` (if >= 0) becomes readable. On `found`, `out` is the first of the addresses, in the
// resolver's order (it holds the lookup they came from); on `failed`, `why` says why.
LookupEnd look_up(const std::string& host, int port, std::chrono::steady_clock::time_point until, bool bounded,
                  int wake_fd, std::shared_ptr<const addrinfo>& out, std::string& why);

// What a lookup ended with, for one that is not waited for (look_up_then).
struct LookupResult {
  LookupEnd end = LookupEnd::failed;
  std::shared_ptr<const addrinfo> addresses;  // on `found`, as look_up's `out`
  std::string why;                            // otherwise
};

// `host` as a numeric address (127.0.0.1, ::1) for a TCP connect to `port`, read at once into
// `out`; false for a name.
bool numeric_address(const std::string& host, int port, std::shared_ptr<const addrinfo>& out);

// Looks the name `host` up (its caller has tried numeric_address first), joining a lookup in flight,
// without waiting for it: `done` runs once, on the lookup's thread when it ends (or here, when it
// has ended already or no thread could be started). The async client's way: its event loop must not
// wait for a resolver.
void look_up_then(const std::string& host, int port, std::function<void(LookupResult)> done);

// How long a poll() may wait for `until`: false once it has passed; -1 (no limit) when not bounded.
// Rounded up, so that a poll never ends a millisecond early and finds time still left.
bool poll_ms_left(std::chrono::steady_clock::time_point until, bool bounded, int& wait_ms);

// For tests: the function that resolves names (getaddrinfo's signature); null puts getaddrinfo back.
// A test that replaces it makes a resolver that hangs or fails without a DNS server of its own.
using ResolveFn = int (*)(const char* host, const char* service, const addrinfo* hints, addrinfo** res);
void set_resolver_for_tests(ResolveFn fn);

}  // namespace redlimit::hiredis_detail

#pragma once
// Sentinel discovery (SentinelConnection's internals): one pass over the sentinels, asking each
// for the master's address and confirming it with ROLE. Every connection is a RedisConnection of
// its own, bounded by connect_timeout and by the deadline of the call in progress (call_deadline.hpp),
// and each of its steps by sentinel_step (below) when the caller's timeouts are 0.
#include <chrono>
#include <cstddef>
#include <string>

#include "redlimit/url.hpp"

namespace redlimit::hiredis_detail {

struct FoundMaster {
  std::string host;
  int port = 0;
  std::size_t sentinel = 0;  // the index of the sentinel that named it
};

// One pass over the sentinels, starting at `first`, each but the last within half the call's time
// left (half_of_call_left, call_deadline.hpp: a sentinel that hangs costs half, not the call). Throws:
//   - AuthError: every sentinel that answered refused our sentinel credentials or knows no master
//     named so, or the master refused the data credentials (configuration: retrying cannot help);
//   - ConnectionError naming each sentinel's answer when no master was confirmed (sentinels down, the
//     master they name down or not a master yet: a failover in progress).
FoundMaster find_master(const SentinelEndpoint& endpoint, std::size_t first, std::chrono::milliseconds connect_timeout,
                        std::chrono::milliseconds command_timeout);

// A timeout for one step of the Sentinel code's own I/O (a sentinel's connect or round trip, the
// ROLE confirmation, the +switch-master subscription): the caller's, or kSentinelStep when that is
// 0 (none). Even a call without a deadline must not wait for ever on one sentinel that hangs (a
// process stopped, a host gone with the connection open, packets dropped) when the next one would
// answer; nor may the listener, which would then never hear an announcement.
constexpr std::chrono::milliseconds kSentinelStep{1000};
inline std::chrono::milliseconds sentinel_step(std::chrono::milliseconds timeout) {
  return timeout.count() > 0 ? timeout : kSentinelStep;
}

// The pause between two discovery passes that found no master (a failover in progress).
constexpr std::chrono::milliseconds kSentinelPause{100};

// find_master, pass after pass while none is confirmed (a failover in progress): after a pause of
// `pause`, while the call (call_deadline.hpp) has more than that left, `rounds` passes at most.
// AuthError (configuration) ends it at once. Used by SentinelConnection (a call's own deadline) and
// MasterWatch (a call of its own, on its thread).
FoundMaster find_master_patiently(const SentinelEndpoint& endpoint, std::size_t first,
                                  std::chrono::milliseconds connect_timeout, std::chrono::milliseconds command_timeout,
                                  int rounds, std::chrono::milliseconds pause);

// The master a sentinel announced (+switch-master, switch_listener.hpp; its `sentinel` unused),
// confirmed with ROLE: true when it says "master". Tried before the sentinels are asked after an
// announcement: one that has not heard of the failover yet still names the old master, which may
// still be up and a master. It takes at most half of the call's time left (half_of_call_left), so an
// announced master that hangs leaves the rest to the sentinels. AuthError when it refuses the data
// credentials (as find_master).
bool confirm_announced(const SentinelEndpoint& endpoint, const FoundMaster& announced,
                       std::chrono::milliseconds connect_timeout, std::chrono::milliseconds command_timeout);

// What a Sentinel transport checks before any I/O: a sentinel and a master name, and TLS options
// this build can use (InvalidArgument otherwise: no TLS in this hiredis; a CA, certificate or key
// that cannot be read). The sentinels and the master share them (parse_sentinel_url).
void check_sentinel_endpoint(const SentinelEndpoint& endpoint);

// "host:port" that sentinel `index` names as the master now; "" when it cannot say (down, refusing,
// not knowing the name, or no answer within half the time the call has left: the call's own command
// needs the rest). The periodic check of a master in use: no ROLE, no error. A caller that got ""
// asks the next sentinel next time.
std::string master_named_by(const SentinelEndpoint& endpoint, std::size_t index,
                            std::chrono::milliseconds connect_timeout, std::chrono::milliseconds command_timeout);

}  // namespace redlimit::hiredis_detail

#pragma once
// The deadline of the call this thread is making through a hiredis transport (docs/reliability.md
// §7 "Deadlines"). The core opens a call around its send step (Connection::begin_call/end_call, via
// CallScope); the outermost transport starts the deadline then, at now + its command_timeout, and
// every step of the call below it reads the same deadline from here: the pool's wait for a
// connection, connecting (min(connect_timeout, time left)), each round trip's socket timeout (the
// time left when that is shorter than command_timeout), the NOSCRIPT reload, the cluster's
// redirects and backoff. A command outside any call (setup, reset(), a test's raw connection) gets
// a deadline of its own: now + command_timeout, as before.
#include <chrono>

namespace redlimit::hiredis_detail {

using DeadlineClock = std::chrono::steady_clock;

// No deadline (command_timeout 0).
constexpr DeadlineClock::time_point no_deadline() { return DeadlineClock::time_point::max(); }

// Opens a call on this thread that began at `started`, with `timeout` (0 = none): its deadline is
// started + timeout. A call already open keeps its deadline (nested transports: a cluster over
// pools over connections).
void begin_call(std::chrono::milliseconds timeout, DeadlineClock::time_point started);
// Closes what begin_call opened. noexcept: runs in destructors.
void end_call() noexcept;

// The deadline for a step started now: the open call's, or now + timeout outside any call;
// no_deadline() when there is none.
DeadlineClock::time_point step_deadline(std::chrono::milliseconds timeout);

// The time the call (or a step started now outside any call) has left: step_deadline() less now;
// nanoseconds::max() when there is no deadline.
std::chrono::nanoseconds left_in_call(std::chrono::milliseconds timeout);

// True inside a call (begin_call without its end_call yet) on this thread.
bool in_call();

// Inside a call with a deadline: now + half the time it has left (no_deadline() otherwise). For a
// step that may be tried elsewhere after it (the next sentinel, the next cluster node to read the
// slot map from): a server that hangs (stopped, its host gone with the connection open) costs half
// the call, not all of it, so the next is still asked in the same call; one slow but alive gets half.
DeadlineClock::time_point half_of_call_left();

// Inside a call: makes `until` the call's deadline while it lives, when that is sooner (the pool's
// shared round trip carries other callers' commands, and ends by the earliest of their deadlines).
class NarrowedCall {
 public:
  explicit NarrowedCall(DeadlineClock::time_point until);
  ~NarrowedCall();
  NarrowedCall(const NarrowedCall&) = delete;
  NarrowedCall& operator=(const NarrowedCall&) = delete;

 private:
  DeadlineClock::time_point previous_;
};

}  // namespace redlimit::hiredis_detail

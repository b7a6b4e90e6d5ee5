#include "call_deadline.hpp"

namespace redlimit::hiredis_detail {

namespace {

struct OpenCall {
  DeadlineClock::time_point deadline = no_deadline();
  int depth = 0;
};

// Per thread: a call runs on the caller's thread from start to end (the sync transports).
thread_local OpenCall open_call;

// `timeout` after `from` (by default now); no_deadline() for a timeout of 0.
DeadlineClock::time_point after(std::chrono::milliseconds timeout,
                                DeadlineClock::time_point from = DeadlineClock::now()) {
  return timeout.count() > 0 ? from + timeout : no_deadline();
}

}  // namespace

void begin_call(std::chrono::milliseconds timeout, DeadlineClock::time_point started) {
  if (open_call.depth++ == 0) open_call.deadline = after(timeout, started);
}

void end_call() noexcept {
  if (open_call.depth > 0 && --open_call.depth == 0) open_call.deadline = no_deadline();
}

DeadlineClock::time_point step_deadline(std::chrono::milliseconds timeout) {
  return open_call.depth > 0 ? open_call.deadline : after(timeout);
}

std::chrono::nanoseconds left_in_call(std::chrono::milliseconds timeout) {
  const auto deadline = step_deadline(timeout);
  if (deadline == no_deadline()) return std::chrono::nanoseconds::max();
  return deadline - DeadlineClock::now();
}

bool in_call() { return open_call.depth > 0; }

DeadlineClock::time_point half_of_call_left() {
  if (open_call.depth == 0 || open_call.deadline == no_deadline()) return no_deadline();
  const auto now = DeadlineClock::now();
  if (open_call.deadline <= now) return open_call.deadline;
  return now + (open_call.deadline - now) / 2;
}

NarrowedCall::NarrowedCall(DeadlineClock::time_point until) : previous_(open_call.deadline) {
  if (open_call.depth > 0 && until < open_call.deadline) open_call.deadline = until;
}

NarrowedCall::~NarrowedCall() {
  if (open_call.depth > 0) open_call.deadline = previous_;
}

}  // namespace redlimit::hiredis_detail

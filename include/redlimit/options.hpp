#pragma once
#include <chrono>
#include <memory>
#include <string>

#include "redlimit/clock.hpp"

namespace redlimit {

enum class TimeSource {
  client,  // the Options::clock's time is passed to each script: injectable, testable
  redis,   // each script reads Redis TIME itself: one clock for every client, no extra round trip
};

struct Options {
  // Prepended to every key. Must not contain '{' or '}' (the hash tag is ours). At most 64 bytes.
  std::string prefix = "redlimit:";
  TimeSource time_source = TimeSource::client;
  // Used when time_source is client, and for blocking waits. nullptr = SystemClock.
  std::shared_ptr<Clock> clock;
  // Deadline to establish a connection; 0 = wait as long as the OS does.
  std::chrono::milliseconds connect_timeout{1000};
  // Deadline for one command's reply; 0 = no deadline.
  std::chrono::milliseconds command_timeout{1000};
};

}  // namespace redlimit

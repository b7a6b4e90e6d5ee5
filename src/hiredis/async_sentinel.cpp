// AsyncRedis::Core following a Sentinel deployment's master (the SentinelEndpoint factories,
// redis_async.hpp). The Core decides when to ask the sentinels; MasterWatch asks them on a thread of
// its own and its outcome comes back through the queue as an urgent item (async_core.cpp,
// take_queue), applied here on the loop's thread. While no master is known, commands wait in the
// backlog, where their deadlines still hold (async_deadline.cpp).
#include <fmt/format.h>

#include <string_view>
#include <utility>

#include "async_core.hpp"
#include "redlimit/detail/message.hpp"
#include "redlimit/errors.hpp"

namespace redlimit {

using async_detail::SteadyClock;
using hiredis_detail::describe;
using Outcome = hiredis_detail::MasterWatch::Outcome;

void AsyncRedis::Core::follow(const SentinelEndpoint& sentinels) {
  watch_ = std::make_unique<hiredis_detail::MasterWatch>(sentinels, options_.connect_timeout, options_.command_timeout);
  master_name_ = sentinels.master_name;
  check_interval_ms_ = sentinels.check_interval_ms;
  need_master_ = true;
  // Announcements reach the Core as urgent items, as a search's outcome does (deliver).
  auto heard = [weak = weak_from_this()](const std::string& host, int port) {
    const auto core = weak.lock();
    if (!core) return;
    Item item;
    item.urgent = true;
    item.task = [raw = core.get(), host, port] { raw->heard_switch(host, port); };
    core->submit(std::move(item));
  };
  listener_ = std::make_unique<hiredis_detail::SwitchListener>(sentinels, options_.connect_timeout,
                                                               options_.command_timeout, std::move(heard));
}

std::string AsyncRedis::Core::master() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return master_;
}

std::string AsyncRedis::Core::where() const {
  if (watch_ && target_.host.empty()) {
    return fmt::format("the master \"{}\" (not found yet)", detail::printable(master_name_));
  }
  return describe(target_);
}

// pump(), before a command: true while it must wait for a search's outcome (one is started when none
// is out). With a connection up, commands go on, and the master in use is checked now and then.
bool AsyncRedis::Core::waiting_for_master(TimePoint now) {
  if (conn_) {
    check_master_now_and_then(now);
    return false;
  }
  if (!need_master_) return false;
  if (!searching_) search(false);
  return true;
}

void AsyncRedis::Core::check_master_now_and_then(TimePoint now) {
  if (check_interval_ms_ <= 0 || searching_ || now - checked_ < std::chrono::milliseconds(check_interval_ms_)) return;
  search(true);
}

void AsyncRedis::Core::search(bool check) {
  searching_ = true;
  checked_ = SteadyClock::now();
  // The outcome reaches the Core through its queue; a Core gone by then (closed) drops it.
  auto done = [weak = weak_from_this()](Outcome outcome) {
    if (const auto core = weak.lock()) core->deliver(std::move(outcome));
  };
  // A master announced since the last search is confirmed first (sentinel_discovery.hpp).
  const bool started =
      check ? watch_->check(master(), std::move(done)) : watch_->find(std::move(done), std::move(announced_));
  if (!check) announced_ = {};
  if (!started) searching_ = false;  // cannot happen: searching_ covers every search out
}

// On the search's thread: queued ahead of everything (Item::urgent), so that it reaches the loop
// past the commands waiting for it.
void AsyncRedis::Core::deliver(Outcome outcome) {
  Item item;
  item.urgent = true;
  item.task = [this, outcome = std::move(outcome)] { apply(outcome); };
  submit(std::move(item));
}

void AsyncRedis::Core::apply(const Outcome& outcome) {
  searching_ = false;
  if (announced_.port != 0 && !shutting_down_) {
    // A master was announced while this search was out: its outcome may be older news. The
    // announced master is confirmed first (heard_switch).
    search(false);
    return;
  }
  switch (outcome.kind) {
    case Outcome::Kind::found:
      try {
        found_master(outcome.host, outcome.port);
      } catch (...) {  // the TLS context for it could not be made (a file gone since the start)
        fail_waiting(std::current_exception());
      }
      break;
    case Outcome::Kind::failed:
      fail_waiting(outcome.error);
      break;
    case Outcome::Kind::same:
      break;
    case Outcome::Kind::moved:
      if (conn_ && conn_->failure.empty() && !conn_->refused) {
        // Commands on it were sent to a server that may no longer be the master: their outcome is
        // unknown, and they fail (never re-sent); the next connection goes to the master found again.
        conn_->failure = fmt::format("the sentinels now name {} as the master \"{}\", not {}", outcome.host,
                                     detail::printable(master_name_), describe(target_));
        retire(*conn_);
      }
      break;
  }
}

void AsyncRedis::Core::found_master(const std::string& host, int port) {
  Endpoint next = endpoint_;
  next.host = host;
  next.port = port;
  if (endpoint_.tls.enabled) tls_ = hiredis_detail::Tls::make(next);  // its name is verified (tls.hpp)
  target_ = std::move(next);
  need_master_ = false;
  ++discoveries_;
  std::lock_guard<std::mutex> lock(mutex_);
  master_ = fmt::format("{}:{}", host, port);
}

// A search found no master: the commands waiting for it fail with its error (the failure policy
// answers them); the next command starts another search.
void AsyncRedis::Core::fail_waiting(const std::exception_ptr& error) {
  for (const ErrorCallback& on_error : take_commands([](const Item&) { return true; })) fail(on_error, error);
}

// A sentinel announced that another server is the master now. The connection to the old one is let
// go (commands on it fail: their outcome is unknown, and they are never re-sent), and a search starts
// at once (or after the one out): the announced master confirmed with ROLE, else the sentinels asked,
// so that the next command finds the new master known.
void AsyncRedis::Core::heard_switch(const std::string& host, int port) {
  ++announcements_;
  if (shutting_down_ || (target_.host == host && target_.port == port)) return;
  if (conn_ && conn_->failure.empty() && !conn_->refused) {  // (a refused one leaves by itself)
    conn_->failure = fmt::format("a sentinel announced {}:{} as the master \"{}\", not {}", host, port,
                                 detail::printable(master_name_), describe(target_));
    retire(*conn_);
  }
  need_master_ = true;
  announced_.host = host;
  announced_.port = port;
  if (!searching_) search(false);
}

}  // namespace redlimit

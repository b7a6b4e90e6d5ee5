// AsyncRedis::Core looking its target's host name up off the event loop. hiredis's redisAsyncConnect
// resolves a name with getaddrinfo on the calling thread, the loop's, for as long as the system's
// resolver takes (10 s and more with a DNS server that does not answer), and every other handler of
// that loop waits meanwhile. Here the name is looked up on a thread of its own (name_lookup.hpp,
// look_up_then), whose outcome comes back through the queue as an urgent item, as a Sentinel
// search's does; the commands wait in the backlog meanwhile, where their deadlines still hold. A
// lookup that outlasts connect_timeout fails the commands waiting for it with TimeoutError, as a
// connect that outlasts it does, and the next command starts (or joins) another. A numeric address
// is read at once. Nothing is kept past the connection it was looked up for.
#include <fmt/format.h>

#include <exception>
#include <string>
#include <utility>

#include "async_core.hpp"
#include "redlimit/errors.hpp"

namespace redlimit {

using hiredis_detail::describe;
using hiredis_detail::LookupEnd;
using hiredis_detail::LookupResult;

// pump(), before a command: true while it must wait for the target's addresses (a lookup is started
// when none is out); false with a connection up, a unix socket, or the addresses known.
bool AsyncRedis::Core::waiting_for_address(TimePoint now) {
  if (conn_ || !target_.unix_path.empty()) return false;
  const std::string target = fmt::format("{}:{}", target_.host, target_.port);
  if (addresses_ && addresses_for_ == target) return false;
  addresses_.reset();
  if (lookup_ != 0) return true;
  addresses_for_ = target;
  if (hiredis_detail::numeric_address(target_.host, target_.port, addresses_)) return false;
  const std::uint64_t lookup = lookup_ = ++lookups_;
  // The outcome reaches the Core through its queue; a Core gone by then (closed) drops it.
  hiredis_detail::look_up_then(target_.host, target_.port, [weak = weak_from_this(), lookup](LookupResult r) {
    const auto core = weak.lock();
    if (!core) return;
    Item item;
    item.urgent = true;
    item.task = [c = core.get(), lookup, r = std::move(r)] { c->resolved(lookup, r); };
    core->submit(std::move(item));
  });
  if (options_.connect_timeout.count() > 0) {
    const TimePoint until = now + options_.connect_timeout;
    later_.emplace(until, [this, lookup] {
      LookupResult late;
      late.end = LookupEnd::timed_out;
      late.why = hiredis_detail::kTimedOut;
      resolved(lookup, late);
    });
    arm_by(until);
  }
  return true;
}

// On the loop: lookup number `lookup` ended (or its time passed). Found: the next command connects
// to its addresses. Otherwise the commands waiting for it fail, and the next one looks the name up
// again. An outcome of a lookup given up on, or one during the shutdown, changes nothing.
void AsyncRedis::Core::resolved(std::uint64_t lookup, const LookupResult& result) {
  if (lookup != lookup_ || shutting_down_) return;
  lookup_ = 0;
  if (result.end == LookupEnd::found) {
    addresses_ = result.addresses;
    return;  // the pump that ran this task goes on to the commands
  }
  const std::string what = fmt::format("connecting to {}: {}", describe(target_), result.why);
  fail_waiting(result.end == LookupEnd::timed_out ? std::make_exception_ptr(TimeoutError(what))
                                                  : std::make_exception_ptr(ConnectionError(what)));
}

}  // namespace redlimit

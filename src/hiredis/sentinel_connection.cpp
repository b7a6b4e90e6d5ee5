#include "redlimit/transport/sentinel_connection.hpp"

#include <fmt/format.h>

#include <string_view>
#include <thread>

#include "call_deadline.hpp"
#include "redlimit/errors.hpp"
#include "sentinel_discovery.hpp"
#include "switch_listener.hpp"

namespace redlimit {

namespace {

bool starts_with(const std::string& s, std::string_view p) { return s.compare(0, p.size(), p) == 0; }

// -READONLY (a replica: a master demoted, or one not promoted yet) and -LOADING (a server loading its
// data): the server refused the command before it could change anything.
bool not_served(const Reply& r) {
  return r.is_error() && (starts_with(r.str, "READONLY") || starts_with(r.str, "LOADING"));
}

}  // namespace

SentinelConnection::SentinelConnection(SentinelEndpoint endpoint, const Options& options)
    : endpoint_(std::move(endpoint)),
      connect_timeout_(options.connect_timeout),
      command_timeout_(options.command_timeout),
      pool_options_(options.pool) {
  // rediss-sentinel:// options this build cannot use are an InvalidArgument now, before any I/O,
  // whatever the failure policy.
  hiredis_detail::check_sentinel_endpoint(endpoint_);
  // One master at a time; the library is replicated with the data, so a promoted replica has it.
  set_script_path(ScriptPath::probe);
  listener_ = std::make_unique<hiredis_detail::SwitchListener>(
      endpoint_, connect_timeout_, command_timeout_,
      [this](const std::string& host, int port) { heard_switch(host, port); });
}

SentinelConnection::~SentinelConnection() = default;

void SentinelConnection::heard_switch(const std::string& host, int port) {
  ++announcements_;
  const std::string address = fmt::format("{}:{}", host, port);
  std::lock_guard<std::mutex> lock(mutex_);
  if (!pool_ || master_ == address) return;
  stale_ = true;  // current() confirms the announced master with ROLE (else asks the sentinels)
  announced_.host = host;
  announced_.port = port;
}

void SentinelConnection::begin_call(std::chrono::steady_clock::time_point started) {
  hiredis_detail::begin_call(command_timeout_, started);
}
void SentinelConnection::end_call() noexcept { hiredis_detail::end_call(); }

std::string SentinelConnection::master() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return master_;
}

std::shared_ptr<ConnectionPool> SentinelConnection::current() {
  if (endpoint_.check_interval_ms > 0) check_now_and_then();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (pool_ && !stale_) return pool_;
  }
  return rediscover();
}

void SentinelConnection::check_now_and_then() {
  const auto now = std::chrono::steady_clock::now();
  const std::chrono::milliseconds every(endpoint_.check_interval_ms);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!pool_ || stale_ || now - checked_ < every) return;
  }
  std::unique_lock<std::mutex> one_at_a_time(discovery_mutex_, std::try_to_lock);
  if (!one_at_a_time.owns_lock()) return;  // another thread is asking already
  std::string in_use;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (now - checked_ < every) return;
    checked_ = now;
    in_use = master_;
  }
  const std::string named =
      hiredis_detail::master_named_by(endpoint_, next_sentinel_, connect_timeout_, command_timeout_);
  if (named.empty()) {  // no answer: the master in use stays, and the next check asks another sentinel
    next_sentinel_ = (next_sentinel_ + 1) % endpoint_.sentinels.size();
    return;
  }
  if (named == in_use) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (master_ == in_use) stale_ = true;  // current() asks the sentinels again, and checks ROLE
}

void SentinelConnection::forget(const std::shared_ptr<ConnectionPool>& pool) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  if (pool_ == pool) stale_ = true;
}

// try_lock polled until the call's deadline, not try_lock_until: ThreadSanitizer (GCC 12) does not
// see a lock taken by pthread_mutex_clocklock (as in cluster_slot_map.cpp).
void SentinelConnection::lock_for_discovery(std::unique_lock<std::mutex>& lock) const {
  const auto deadline = hiredis_detail::step_deadline(command_timeout_);
  if (deadline == hiredis_detail::no_deadline()) {
    lock.lock();
    return;
  }
  while (!lock.try_lock()) {
    if (hiredis_detail::DeadlineClock::now() >= deadline) {
      throw TimeoutError("the call's deadline passed waiting for another thread to ask the sentinels");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

std::shared_ptr<ConnectionPool> SentinelConnection::rediscover() {
  std::unique_lock<std::mutex> one_at_a_time(discovery_mutex_, std::defer_lock);
  lock_for_discovery(one_at_a_time);
  hiredis_detail::FoundMaster found;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (pool_ && !stale_) return pool_;  // found by another thread meanwhile
    found.host = std::move(announced_.host);
    found.port = announced_.port;
    announced_ = {};
  }
  if (found.port == 0 || !hiredis_detail::confirm_announced(endpoint_, found, connect_timeout_, command_timeout_)) {
    found = hiredis_detail::find_master_patiently(endpoint_, next_sentinel_, connect_timeout_, command_timeout_,
                                                  max_rounds(), hiredis_detail::kSentinelPause);
    next_sentinel_ = found.sentinel;  // ask it first next time
  }
  const std::string address = fmt::format("{}:{}", found.host, found.port);
  std::lock_guard<std::mutex> lock(mutex_);
  if (!pool_ || master_ != address) {
    Endpoint master = endpoint_.master;
    master.host = found.host;
    master.port = found.port;
    pool_ = std::make_shared<ConnectionPool>(std::move(master), connect_timeout_, command_timeout_, pool_options_);
    if (hook_) pool_->on_connect(hook_);
    master_ = address;
  }
  stale_ = false;
  checked_ = std::chrono::steady_clock::now();
  ++discoveries_;
  return pool_;
}

Reply SentinelConnection::send(const std::shared_ptr<ConnectionPool>& pool, const std::vector<std::string>& argv) {
  try {
    Reply reply = pool->command(argv);
    if (not_served(reply)) forget(pool);
    return reply;
  } catch (const ConnectionError&) {
    forget(pool);  // its outcome is unknown: never re-sent; the next call asks the sentinels first
    throw;
  }
}

Reply SentinelConnection::command(const std::vector<std::string>& argv) {
  CallScope call(*this);  // a command outside any call is a call of its own
  Reply reply = send(current(), argv);
  // Refused before it ran: once more, to the master found again, if the call has time.
  if (!not_served(reply) || hiredis_detail::left_in_call(command_timeout_) <= std::chrono::nanoseconds::zero())
    return reply;
  std::shared_ptr<ConnectionPool> again;
  try {
    again = current();
  } catch (const ConnectionError&) {
    return reply;  // nothing re-sent: the refusal stands (an outage reply, for the failure policy)
  }
  return send(again, argv);
}

std::vector<Reply> SentinelConnection::pipeline(const std::vector<std::vector<std::string>>& commands) {
  CallScope call(*this);
  auto pool = current();
  std::vector<Reply> replies;
  try {
    replies = pool->pipeline(commands);
  } catch (const ConnectionError&) {
    forget(pool);  // as in command(): never re-sent
    throw;
  }
  std::vector<std::size_t> again;  // refused before they ran
  std::vector<std::vector<std::string>> resend;
  for (std::size_t i = 0; i < replies.size(); ++i) {
    if (!not_served(replies[i])) continue;
    again.push_back(i);
    resend.push_back(commands[i]);
  }
  if (again.empty()) return replies;
  forget(pool);
  if (hiredis_detail::left_in_call(command_timeout_) <= std::chrono::nanoseconds::zero()) return replies;
  try {
    pool = current();
  } catch (const ConnectionError&) {
    return replies;  // nothing re-sent: the refusals stand (outage replies, for the failure policy)
  }
  try {
    std::vector<Reply> second = pool->pipeline(resend);
    for (std::size_t j = 0; j < again.size(); ++j) {
      if (not_served(second[j])) forget(pool);  // refused there too: the next call asks again
      replies[again[j]] = std::move(second[j]);
    }
  } catch (const ConnectionError& e) {
    forget(pool);
    for (std::size_t i : again) replies[i] = transit_failure(e);  // outcome unknown: never re-sent
  }
  return replies;
}

}  // namespace redlimit

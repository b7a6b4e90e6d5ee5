// MasterWatch: Sentinel searches on a thread of their own, for AsyncRedis (master_watch.hpp).
#include "master_watch.hpp"

#include <fmt/format.h>

#include <utility>

#include "call_deadline.hpp"
#include "redlimit/transport/sentinel_connection.hpp"
#include "sentinel_discovery.hpp"

namespace redlimit::hiredis_detail {

MasterWatch::MasterWatch(SentinelEndpoint endpoint, std::chrono::milliseconds connect_timeout,
                         std::chrono::milliseconds command_timeout)
    : endpoint_(std::move(endpoint)),
      connect_timeout_(connect_timeout),
      command_timeout_(command_timeout),
      interrupt_(std::make_shared<Interrupt>()) {}

MasterWatch::~MasterWatch() {
  interrupt_->halt();
  if (!worker_.joinable()) return;
  if (worker_.get_id() == std::this_thread::get_id()) {
    worker_.detach();  // the search's callback let the last owner go: its thread ends by itself
  } else {
    worker_.join();
  }
}

bool MasterWatch::find(Done done, FoundMaster announced) {
  return launch([this, announced = std::move(announced)] { return search(announced); }, std::move(done));
}

bool MasterWatch::check(std::string in_use, Done done) {
  return launch(
      [this, in_use = std::move(in_use)] {
        std::size_t first = 0;
        {
          std::lock_guard<std::mutex> lock(mutex_);
          first = next_sentinel_;
        }
        Outcome out;
        const std::string named = master_named_by(endpoint_, first, connect_timeout_, command_timeout_);
        if (named.empty()) {  // it could not say: the next check asks another sentinel
          std::lock_guard<std::mutex> lock(mutex_);
          if (next_sentinel_ == first) next_sentinel_ = (first + 1) % endpoint_.sentinels.size();
        }
        out.kind = named.empty() || named == in_use ? Outcome::Kind::same : Outcome::Kind::moved;
        out.host = named;
        return out;
      },
      std::move(done));
}

MasterWatch::Outcome MasterWatch::search(const FoundMaster& announced) {
  std::size_t first = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    first = next_sentinel_;
  }
  Outcome out;
  // One call's deadline over the whole search, as SentinelConnection's caller gives it one.
  begin_call(command_timeout_, DeadlineClock::now());
  try {
    out.kind = Outcome::Kind::found;
    if (announced.port > 0 && confirm_announced(endpoint_, announced, connect_timeout_, command_timeout_)) {
      out.host = announced.host;
      out.port = announced.port;
    } else {
      const FoundMaster found = find_master_patiently(endpoint_, first, connect_timeout_, command_timeout_,
                                                      SentinelConnection::max_rounds(), kSentinelPause);
      out.host = found.host;
      out.port = found.port;
      std::lock_guard<std::mutex> lock(mutex_);
      next_sentinel_ = found.sentinel;  // asked first next time
    }
  } catch (...) {
    out.kind = Outcome::Kind::failed;
    out.error = std::current_exception();
  }
  end_call();
  return out;
}

bool MasterWatch::launch(std::function<Outcome()> work, Done done) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (busy_) return false;
  // The last search has ended (busy_ is cleared as its thread's last use of this object): joined
  // at once.
  if (worker_.joinable()) worker_.join();
  busy_ = true;
  worker_ = std::thread([this, interrupt = interrupt_, work = std::move(work), done = std::move(done)] {
    block_sigpipe_on_this_thread();
    Outcome out;
    {
      const InterruptScope scope(*interrupt);
      out = work();
      interrupt->forget_all();  // the search's connections are closed
    }
    {
      std::lock_guard<std::mutex> inner(mutex_);
      busy_ = false;
    }
    done(std::move(out));  // may destroy *this (~MasterWatch detaches this thread then)
  });
  return true;
}

}  // namespace redlimit::hiredis_detail

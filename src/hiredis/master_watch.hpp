#pragma once
// Sentinel discovery for AsyncRedis (its SentinelEndpoint factories, redis_async.hpp), off the event
// loop. Asking a sentinel and confirming the master with ROLE are blocking round trips
// (sentinel_discovery.hpp), and a sentinel that hangs would hold the loop for its whole timeout, so
// each search runs on a thread of its own, one at a time, and hands its outcome to a callback
// (AsyncRedis::Core queues it to the loop). The Core decides when to search; this only searches.
#include <chrono>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "interrupt.hpp"
#include "redlimit/url.hpp"
#include "sentinel_discovery.hpp"

namespace redlimit::hiredis_detail {

class MasterWatch {
 public:
  struct Outcome {
    enum class Kind {
      found,   // find(): a master confirmed at host:port
      failed,  // find(): none; `error` says why (ConnectionError, AuthError, TlsError)
      same,    // check(): the sentinel names the master in use, or could not say
      moved,   // check(): the sentinel names another master (host:port)
    };
    Kind kind = Kind::failed;
    std::string host;
    int port = 0;
    std::exception_ptr error;
  };
  using Done = std::function<void(Outcome)>;

  // No I/O. The endpoint has been checked (check_sentinel_endpoint, sentinel_discovery.hpp).
  MasterWatch(SentinelEndpoint endpoint, std::chrono::milliseconds connect_timeout,
              std::chrono::milliseconds command_timeout);
  // Ends a search in progress at once (interrupt.hpp: its connects and replies stop waiting; it
  // fails with a ConnectionError, which its callback gets) and waits for its thread; from the
  // search's own thread (its callback released the last owner) it lets that thread finish by itself.
  ~MasterWatch();
  MasterWatch(const MasterWatch&) = delete;
  MasterWatch& operator=(const MasterWatch&) = delete;

  // Starts a search on a thread of its own and returns true; false, starting nothing, while one runs.
  // `done` runs on that thread, once, as the search's last touch of this object.
  //   find():  the master a sentinel announced, if given (port > 0), confirmed with ROLE; else (or
  //            when it is not a master) passes over the sentinels until a master is confirmed,
  //            within command_timeout (find_master_patiently) -> found or failed;
  //   check(): asks the sentinel that answered last which master it names, and compares that with
  //            `in_use` ("host:port") -> same or moved.
  bool find(Done done, FoundMaster announced = {});
  bool check(std::string in_use, Done done);

 private:
  bool launch(std::function<Outcome()> work, Done done);
  Outcome search(const FoundMaster& announced);

  const SentinelEndpoint endpoint_;
  const std::chrono::milliseconds connect_timeout_;
  const std::chrono::milliseconds command_timeout_;

  // Halted by the destructor; shared with the search's thread, which may outlive this object.
  const std::shared_ptr<Interrupt> interrupt_;

  std::mutex mutex_;  // guards the three below
  std::thread worker_;
  bool busy_ = false;
  std::size_t next_sentinel_ = 0;  // the one that answered last: asked first
};

}  // namespace redlimit::hiredis_detail

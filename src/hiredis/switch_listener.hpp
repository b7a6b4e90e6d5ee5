#pragma once
// Sentinel's failover announcements for AsyncRedis (its SentinelEndpoint factories, redis_async.hpp).
// A sentinel publishes "+switch-master <name> <old ip> <old port> <new ip> <new port>" the moment it
// promotes a replica. Without hearing it, a client learns of a failover only when a call fails on
// the old master, is refused (-READONLY), or the periodic check comes round (sentinel_check_ms):
// with an old master that stays up, up to a second of writes the new master never sees.
//
// One thread of its own subscribes on one sentinel at a time (the next one when that connection
// ends, after a pause) and hands each announcement for our master name to a callback. It decides
// nothing: the caller asks the sentinels again (MasterWatch, ROLE confirmation) before connecting.
// A sentinel that refuses SUBSCRIBE (an ACL without it) or our credentials is not asked again; once
// all have, nothing is listened to: the other ways of following a failover still hold.
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "redlimit/url.hpp"

namespace redlimit::hiredis_detail {

class SwitchListener {
 public:
  // Runs on the listener's thread, once per announcement for the endpoint's master name.
  using Heard = std::function<void(const std::string& host, int port)>;

  // Starts the thread; no I/O on the caller's. The endpoint has been checked
  // (check_sentinel_endpoint, sentinel_discovery.hpp).
  SwitchListener(SentinelEndpoint endpoint, std::chrono::milliseconds connect_timeout,
                 std::chrono::milliseconds command_timeout, Heard heard);
  // Wakes the thread and waits for it, which ends at once whatever it was waiting for: a message,
  // the pause between sentinels, a TCP connect, or a reply (its socket's reading half is shut down). Only
  // resolving a sentinel's name and a unix socket's connect are waited out. From the thread itself
  // (its callback released the last owner), it lets the thread end by itself.
  ~SwitchListener();
  SwitchListener(const SwitchListener&) = delete;
  SwitchListener& operator=(const SwitchListener&) = delete;

 private:
  struct State;
  std::shared_ptr<State> state_;
  std::thread thread_;
};

}  // namespace redlimit::hiredis_detail

#pragma once
// The asynchronous seam: send a command, get its reply later through a callback that runs on the
// event loop's thread. Many commands may be in flight on one connection; replies come back in order.
#include <algorithm>
#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "redlimit/reply.hpp"
#include "redlimit/transport/script_path.hpp"

namespace redlimit {

class Connection;

class AsyncConnection {
 public:
  using ReplyCallback = std::function<void(Reply)>;
  using ErrorCallback = std::function<void(std::exception_ptr)>;
  // A call's deadline (docs/reliability.md §7); a default-constructed Deadline means none.
  using Deadline = std::chrono::steady_clock::time_point;

  virtual ~AsyncConnection() = default;

  // Queues argv. Exactly one of on_reply / on_error runs later on the loop thread: on_reply with
  // the reply (error replies included), on_error with a ConnectionError when the connection broke
  // before the reply arrived, or a TimeoutError (a ConnectionError too) when the connection's own
  // deadline passed first (the outcome is then unknown). Thread-safe to call from any thread.
  virtual void command_async(std::vector<std::string> argv, ReplyCallback on_reply, ErrorCallback on_error) = 0;

  // The deadline a call starting now gets. A call made of several commands (EVALSHA, then after
  // NOSCRIPT a reload and EVALSHA or EVAL again) takes it once and sends each of its commands with
  // command_async_until, so that one deadline bounds the whole call. This default: none.
  virtual Deadline call_deadline() const { return {}; }

  // command_async bounded by the call's `deadline` (Deadline{}: none) rather than one of its own:
  // once it passes, on_error gets a TimeoutError, whether the command still waits to be sent (it is
  // then never sent) or waits for its reply (a late reply is dropped). This default ignores the
  // deadline and calls command_async: right for a connection that keeps no deadlines.
  virtual void command_async_until(std::vector<std::string> argv, ReplyCallback on_reply, ErrorCallback on_error,
                                   Deadline deadline) {
    (void)deadline;
    command_async(std::move(argv), std::move(on_reply), std::move(on_error));
  }

  // Runs `task` on the thread where this connection's callbacks run, in order with the commands
  // queued around it (the order they are sent in; their replies come later). The strategies deliver
  // a decision made without Redis (e.g. a local-cache rejection) to its callback through post, so it
  // runs on the same thread as the callbacks Redis answers.
  //
  // This default runs `task` at once on the calling thread, and an exception escaping it reaches
  // the caller: right for a connection whose callbacks may run on the caller's thread. A connection
  // with an event loop overrides it (AsyncRedis runs `task` on the loop's thread).
  virtual void post(std::function<void()> task) { task(); }

  // post(), no sooner than `delay` from now: the wait between the tries of a command the server
  // asked to send again later (AsyncCluster: TRYAGAIN, CLUSTERDOWN). A connection that closes
  // meanwhile runs the task then. This default runs it at once, through post(): a connection with
  // no event loop has nothing to wait on.
  virtual void post_after(std::chrono::milliseconds delay, std::function<void()> task) {
    (void)delay;
    post(std::move(task));
  }

  // Called on the thread where this connection's callbacks run, from inside one of them: sends now
  // what was queued since (posted tasks, and the commands they and the caller queued) instead of
  // when the callback returns. A callback that starts many calls in a row (a merged call's reply
  // handing each of its callers a decision, each starting its next call) calls it midway, so that
  // Redis decides the first half's calls while the second half's are made, where otherwise Redis
  // and the client would take turns. A hint: this default, and a call off the loop, do nothing.
  virtual void send_now() {}

  // True when each command goes to the Redis Cluster master that serves its key (AsyncCluster): a
  // limiter over a cluster accepts only such a connection (RateLimiter::attach_async).
  virtual bool routes_by_slot() const { return false; }

  // The limiter's own connection, handed over by RateLimiter::attach_async. A router that keeps a
  // map of where keys live (AsyncCluster) takes that connection's map from then on, so that both
  // paths learn one map, and the limiter's breakers, kept per shard by that map
  // (Connection::node_of), refuse and admit async calls by the master that now serves them. This
  // default: nothing to share.
  virtual void share_routing(const std::shared_ptr<Connection>& limiter_connection) { (void)limiter_connection; }

  // A breaker of the limiter refused a call for `key` (its master failed repeatedly, and nothing is
  // sent to it now): a router reads its map again without blocking, in case a failover replaced
  // that master, since no reply of it will say so (Connection::shard_refused is the synchronous
  // twin). Called on any thread. This default: nothing.
  virtual void shard_refused(std::string_view key) { (void)key; }

  // The NOSCRIPT rule's bookkeeping on this connection (redlimit/detail/script.hpp): the scripts
  // whose SCRIPT LOAD is on its way, by SHA1, so that one reload serves every call that met
  // NOSCRIPT meanwhile. begin_script_load() answers true when the caller must send the LOAD (none
  // is on its way), and the caller then calls end_script_load() once the LOAD is answered or failed.
  bool begin_script_load(const std::string& sha1) {
    std::lock_guard<std::mutex> lock(script_loads_mutex_);
    if (std::find(script_loads_.begin(), script_loads_.end(), sha1) != script_loads_.end()) return false;
    script_loads_.push_back(sha1);
    return true;
  }
  void end_script_load(const std::string& sha1) {
    std::lock_guard<std::mutex> lock(script_loads_mutex_);
    script_loads_.erase(std::remove(script_loads_.begin(), script_loads_.end(), sha1), script_loads_.end());
  }

  // How scripts are called on this connection (redlimit/transport/script_path.hpp). The library's
  // FUNCTION LOAD goes through begin_script_load() too, under the library's name.
  ScriptPath script_path() const { return script_path_.get(); }
  void set_script_path(ScriptPath p) { script_path_.set(p); }
  ScriptPathState& script_path_state() { return script_path_; }

 private:
  ScriptPathState script_path_;
  std::mutex script_loads_mutex_;
  std::vector<std::string> script_loads_;  // a handful at most: one per script in use
};

}  // namespace redlimit

#pragma once
// The asynchronous seam: send a command, get its reply later through a callback that runs on the
// event loop's thread. Many commands may be in flight on one connection; replies come back in order.
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "redlimit/reply.hpp"

namespace redlimit {

class AsyncConnection {
 public:
  using ReplyCallback = std::function<void(Reply)>;
  using ErrorCallback = std::function<void(std::exception_ptr)>;

  virtual ~AsyncConnection() = default;

  // Queues argv. Exactly one of on_reply / on_error runs later on the loop thread: on_reply with
  // the reply (error replies included), on_error with a ConnectionError when the connection broke
  // before the reply arrived (its outcome is then unknown). Thread-safe to call from any thread.
  virtual void command_async(std::vector<std::string> argv, ReplyCallback on_reply, ErrorCallback on_error) = 0;

  // Runs `task` on the thread where this connection's callbacks run, in order with the commands
  // queued around it (the order they are sent in; their replies come later). The strategies deliver
  // a decision made without Redis (e.g. a local-cache rejection) to its callback through post, so it
  // runs on the same thread as the callbacks Redis answers.
  //
  // This default runs `task` at once on the calling thread, and an exception escaping it reaches
  // the caller: right for a connection whose callbacks may run on the caller's thread. A connection
  // with an event loop overrides it (AsyncRedis runs `task` on the loop's thread).
  virtual void post(std::function<void()> task) { task(); }
};

}  // namespace redlimit

// AsyncRedis, the public handle: it checks its arguments and queues each command, task or close on
// its Core. The Core (async_core.hpp) does the rest; the factories are in async_libevent.cpp and
// async_libuv.cpp.
#include "redlimit/transport/redis_async.hpp"

#include <utility>

#include "async_core.hpp"
#include "redlimit/errors.hpp"

namespace redlimit {

AsyncRedis::AsyncRedis(std::shared_ptr<Core> core) : core_(std::move(core)) {
  set_script_path(ScriptPath::probe);  // one server: Redis Functions if it has them
}

AsyncRedis::~AsyncRedis() {
  try {
    close();
  } catch (...) {  // out of memory while queueing the close: nothing better to do
  }
}

void AsyncRedis::command_async(std::vector<std::string> argv, ReplyCallback on_reply, ErrorCallback on_error) {
  command_async_until(std::move(argv), std::move(on_reply), std::move(on_error), call_deadline());
}

AsyncRedis::Deadline AsyncRedis::call_deadline() const { return core_->call_deadline(); }

void AsyncRedis::command_async_until(std::vector<std::string> argv, ReplyCallback on_reply, ErrorCallback on_error,
                                     Deadline deadline) {
  if (argv.empty()) throw InvalidArgument("empty command");
  if (!on_reply || !on_error) throw InvalidArgument("command_async needs both callbacks");
  Core::Item item;
  item.argv = std::move(argv);
  item.on_reply = std::move(on_reply);
  item.on_error = std::move(on_error);
  item.deadline = deadline;
  core_->submit(std::move(item));
}

void AsyncRedis::post(std::function<void()> task) {
  if (!task) throw InvalidArgument("post needs a task");
  Core::Item item;
  item.task = std::move(task);
  core_->submit(std::move(item));
}

void AsyncRedis::post_after(std::chrono::milliseconds delay, std::function<void()> task) {
  if (!task) throw InvalidArgument("post_after needs a task");
  if (delay.count() < 0) throw InvalidArgument("post_after: negative delay");
  Core::Item item;
  item.task = std::move(task);
  item.not_before = std::chrono::steady_clock::now() + delay;
  core_->submit(std::move(item));
}

void AsyncRedis::send_now() { core_->send_now(); }

void AsyncRedis::close() {
  Core::Item item;
  item.close = true;
  core_->submit(std::move(item));
}

const Endpoint& AsyncRedis::endpoint() const { return core_->endpoint(); }

std::string AsyncRedis::master() const { return core_->master(); }

std::shared_ptr<AsyncRedis> AsyncRedis::begin(std::shared_ptr<Core> core, const SentinelEndpoint* sentinels) {
  if (sentinels != nullptr) core->follow(*sentinels);
  core->start();
  return std::shared_ptr<AsyncRedis>(new AsyncRedis(std::move(core)));
}

AsyncRedis::Stats AsyncRedis::stats() const { return core_->stats(); }

}  // namespace redlimit

#include "redlimit/transport/redis_connection.hpp"
#include "hiredis_reply.hpp"

#include <fmt/format.h>
#include <hiredis/hiredis.h>

#include <cerrno>
#include <cstring>
#include <sys/time.h>

#include "redlimit/errors.hpp"

namespace redlimit {

namespace {

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

timeval to_timeval(std::chrono::milliseconds d) {
  timeval tv{};
  tv.tv_sec = static_cast<decltype(tv.tv_sec)>(d.count() / 1000);
  tv.tv_usec = static_cast<decltype(tv.tv_usec)>((d.count() % 1000) * 1000);
  return tv;
}


// hiredis reports a read deadline as an I/O error with errno EAGAIN (0.14) or as REDIS_ERR_TIMEOUT (1.x).
bool is_timeout(const redisContext& c) {
#ifdef REDIS_ERR_TIMEOUT
  if (c.err == REDIS_ERR_TIMEOUT) return true;
#endif
  if (c.err != REDIS_ERR_IO) return false;
  return errno == EAGAIN || errno == EWOULDBLOCK || errno == ETIMEDOUT || errno == EINPROGRESS ||
         std::strstr(c.errstr, "timed out") != nullptr || std::strstr(c.errstr, "temporarily unavailable") != nullptr;
}

std::string describe(const Endpoint& e) {
  return e.unix_path.empty() ? fmt::format("{}:{}", e.host, e.port) : e.unix_path;
}

}  // namespace

void RedisConnection::ContextDeleter::operator()(redisContext* c) const { redisFree(c); }

RedisConnection::RedisConnection(Endpoint endpoint, std::chrono::milliseconds connect_timeout,
                                 std::chrono::milliseconds command_timeout)
    : endpoint_(std::move(endpoint)), connect_timeout_(connect_timeout), command_timeout_(command_timeout) {}

RedisConnection::~RedisConnection() = default;
RedisConnection::RedisConnection(RedisConnection&&) noexcept = default;
RedisConnection& RedisConnection::operator=(RedisConnection&&) noexcept = default;

void RedisConnection::fail(const char* during) {
  // An error on a redisContext is sticky and the stream may hold half a reply: drop the context so
  // the next command starts on a fresh connection, never reading an old reply as its own.
  const bool timeout = ctx_ && is_timeout(*ctx_);
  const std::string what = fmt::format("{} {}: {}", during, describe(endpoint_), ctx_ ? ctx_->errstr : "no context");
  ctx_.reset();
  if (timeout) throw TimeoutError(what);
  throw ConnectionError(what);
}

redisContext& RedisConnection::context() {
  if (ctx_) return *ctx_;
  redisContext* raw = nullptr;
  const timeval tv = to_timeval(connect_timeout_);
  if (!endpoint_.unix_path.empty()) {
    raw = connect_timeout_.count() > 0 ? redisConnectUnixWithTimeout(endpoint_.unix_path.c_str(), tv)
                                       : redisConnectUnix(endpoint_.unix_path.c_str());
  } else {
    raw = connect_timeout_.count() > 0 ? redisConnectWithTimeout(endpoint_.host.c_str(), endpoint_.port, tv)
                                       : redisConnect(endpoint_.host.c_str(), endpoint_.port);
  }
  if (raw == nullptr) throw ConnectionError(fmt::format("cannot allocate a connection to {}", describe(endpoint_)));
  ctx_.reset(raw);
  if (ctx_->err) fail("connecting to");
  // Set on every new context: hiredis 0.14 does not carry it across reconnects.
  if (command_timeout_.count() > 0 && redisSetTimeout(ctx_.get(), to_timeval(command_timeout_)) != REDIS_OK) {
    fail("setting the command timeout on");
  }
  std::vector<std::vector<std::string>> setup;
  if (!endpoint_.password.empty()) {
    if (endpoint_.username.empty()) {
      setup.push_back({"AUTH", endpoint_.password});
    } else {
      setup.push_back({"AUTH", endpoint_.username, endpoint_.password});
    }
  }
  if (endpoint_.db != 0) setup.push_back({"SELECT", std::to_string(endpoint_.db)});
  for (const auto& cmd : setup) {
    const Reply r = command(cmd);
    if (r.is_error()) {
      ctx_.reset();
      // Never the command's arguments: AUTH's are the credentials.
      throw AuthError(fmt::format("{} on {} failed: {}", cmd[0], describe(endpoint_), r.str));
    }
  }
  return *ctx_;
}

namespace {

struct Argv {
  std::vector<const char*> ptrs;
  std::vector<std::size_t> lens;
  explicit Argv(const std::vector<std::string>& args) {
    ptrs.reserve(args.size());
    lens.reserve(args.size());
    for (const auto& a : args) {
      ptrs.push_back(a.data());
      lens.push_back(a.size());
    }
  }
};

}  // namespace

Reply RedisConnection::command(const std::vector<std::string>& args) {
  if (args.empty()) throw InvalidArgument("empty command");
  redisContext& c = context();
  Argv argv(args);
  ReplyPtr reply(static_cast<redisReply*>(
      redisCommandArgv(&c, static_cast<int>(args.size()), argv.ptrs.data(), argv.lens.data())));
  if (!reply) fail("command to");
  return detail::from_hiredis(*reply);
}

std::vector<Reply> RedisConnection::pipeline(const std::vector<std::vector<std::string>>& commands) {
  std::vector<Reply> out;
  if (commands.empty()) return out;
  // Checked before anything is appended: a command left in the context's output buffer would go
  // out with the next call, whose replies would then be read one step behind.
  for (const auto& args : commands) {
    if (args.empty()) throw InvalidArgument("empty command in pipeline");
  }
  redisContext& c = context();
  for (const auto& args : commands) {
    Argv argv(args);
    if (redisAppendCommandArgv(&c, static_cast<int>(args.size()), argv.ptrs.data(), argv.lens.data()) != REDIS_OK) {
      fail("pipelining to");
    }
  }
  out.reserve(commands.size());
  for (std::size_t i = 0; i < commands.size(); ++i) {
    void* raw = nullptr;
    if (redisGetReply(&c, &raw) != REDIS_OK || raw == nullptr) fail("reading pipelined replies from");
    ReplyPtr reply(static_cast<redisReply*>(raw));
    out.push_back(detail::from_hiredis(*reply));
  }
  return out;
}

}  // namespace redlimit

#include "redlimit/transport/redis_connection.hpp"

#include <fmt/format.h>
#include <hiredis/hiredis.h>
#include <poll.h>
#include <sys/time.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "call_deadline.hpp"
#include "endpoint_text.hpp"
#include "hiredis_reply.hpp"
#include "interrupt.hpp"
#include "redlimit/detail/message.hpp"
#include "redlimit/errors.hpp"
#include "self_connect.hpp"
#include "tcp_connect.hpp"
#include "tls.hpp"

namespace redlimit {

namespace {

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

timeval to_timeval(std::chrono::microseconds d) {
  timeval tv{};
  tv.tv_sec = static_cast<decltype(tv.tv_sec)>(d.count() / 1000000);
  tv.tv_usec = static_cast<decltype(tv.tv_usec)>(d.count() % 1000000);
  return tv;
}

// The time left until `deadline`, at least 1 ms: a zero socket timeout would mean none at all.
std::chrono::microseconds time_left(hiredis_detail::DeadlineClock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - hiredis_detail::DeadlineClock::now());
  return std::max<std::chrono::microseconds>(left, std::chrono::milliseconds(1));
}

// How far a round trip may overrun its call's deadline so that the common case needs no setsockopt:
// inside a call the time left is always a little under command_timeout (the call started a few
// microseconds before its round trip), and shortening the socket's timeout by that little would cost
// four system calls a round trip (SO_RCVTIMEO and SO_SNDTIMEO, set and restored). The same 1 ms as
// time_left's floor.
constexpr std::chrono::milliseconds kSlack{1};

bool passed(hiredis_detail::DeadlineClock::time_point deadline) {
  return deadline != hiredis_detail::no_deadline() && hiredis_detail::DeadlineClock::now() >= deadline;
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

using hiredis_detail::describe;

}  // namespace

void RedisConnection::ContextDeleter::operator()(redisContext* c) const { redisFree(c); }

RedisConnection::RedisConnection(Endpoint endpoint, std::chrono::milliseconds connect_timeout,
                                 std::chrono::milliseconds command_timeout)
    : RedisConnection(endpoint, connect_timeout, command_timeout, hiredis_detail::Tls::make(endpoint)) {}

RedisConnection::RedisConnection(Endpoint endpoint, std::chrono::milliseconds connect_timeout,
                                 std::chrono::milliseconds command_timeout,
                                 std::shared_ptr<const hiredis_detail::Tls> tls)
    : endpoint_(std::move(endpoint)),
      connect_timeout_(connect_timeout),
      command_timeout_(command_timeout),
      tls_(std::move(tls)) {
  if (endpoint_.tls.enabled && !tls_) tls_ = hiredis_detail::Tls::make(endpoint_);
  set_script_path(ScriptPath::probe);  // one server: Redis Functions if it has them
}

bool RedisConnection::has_tls() {
#ifdef REDLIMIT_HAVE_TLS
  return true;
#else
  return false;
#endif
}

RedisConnection::~RedisConnection() = default;
RedisConnection::RedisConnection(RedisConnection&&) noexcept = default;
RedisConnection& RedisConnection::operator=(RedisConnection&&) noexcept = default;

void RedisConnection::fail(const char* during, const std::string& why) {
  // An error on a redisContext is sticky and the stream may hold half a reply: drop the context so
  // the next command starts on a fresh connection, never reading an old reply as its own.
  const bool timeout = ctx_ && is_timeout(*ctx_);
  std::string what = fmt::format("{} {}: {}", during, describe(endpoint_),
                                 !why.empty() ? why : ctx_ ? ctx_->errstr : "no context");
  // hiredis reports a TLS alert from the server (a client certificate it refused or did not get) as
  // a bare I/O error: OpenSSL knows the reason.
  if (tls_) {
    if (const std::string reason = hiredis_detail::Tls::last_error(); !reason.empty()) {
      what += " (TLS: " + reason + ")";
    } else if (unanswered_) {
      // Often the socket is reset before the alert is read: the likely reason, as a hint.
      what += endpoint_.tls.cert_file.empty()
                  ? " (TLS: the server dropped the connection before its first reply: does it require a client "
                    "certificate? tls_cert_file and tls_key_file)"
                  : " (TLS: the server dropped the connection before its first reply: did it refuse our client "
                    "certificate?)";
    }
  }
  ctx_.reset();
  if (timeout) throw TimeoutError(what);
  throw ConnectionError(what);
}

void RedisConnection::begin_call(std::chrono::steady_clock::time_point started) {
  hiredis_detail::begin_call(command_timeout_, started);
}
void RedisConnection::end_call() noexcept { hiredis_detail::end_call(); }

// The TLS handshake on the new context, part of connecting: bounded by the same time as the connect.
// A refused certificate is a TlsError (configuration); anything else a ConnectionError or TimeoutError.
void RedisConnection::start_tls(std::chrono::microseconds limit) {
  if (limit.count() > 0 && redisSetTimeout(ctx_.get(), to_timeval(limit)) != REDIS_OK) {
    fail("setting the connect timeout on");
  }
  std::string why;
  const auto started = tls_->start(*ctx_, why);
  if (started == hiredis_detail::Tls::Start::refused) {
    ctx_.reset();
    throw TlsError(fmt::format("handshake with {}: {}", describe(endpoint_), why));
  }
  if (started == hiredis_detail::Tls::Start::failed) fail("TLS handshake with", why);
  if (command_timeout_.count() == 0 && limit.count() > 0 && redisSetTimeout(ctx_.get(), timeval{}) != REDIS_OK) {
    fail("clearing the connect timeout on");  // no command deadline: none on the socket either
  }
}

redisContext* RedisConnection::open_context(std::chrono::microseconds limit) {
  redisContext* raw = nullptr;
  const timeval tv = to_timeval(limit);
  if (!endpoint_.unix_path.empty()) {
    raw = limit.count() > 0 ? redisConnectUnixWithTimeout(endpoint_.unix_path.c_str(), tv)
                            : redisConnectUnix(endpoint_.unix_path.c_str());
  } else {
    // Our connect, not hiredis's: the name's lookup is bounded too (tcp_connect.hpp), and under an
    // interrupt the wait ends on its wake pipe.
    hiredis_detail::Interrupt* interrupt = hiredis_detail::current_interrupt();
    raw = hiredis_detail::connect_context(endpoint_, limit, interrupt ? interrupt->wake_fd() : -1);
  }
  if (raw == nullptr) throw ConnectionError(fmt::format("cannot allocate a connection to {}", describe(endpoint_)));
  return raw;
}

redisContext& RedisConnection::context() {
  if (ctx_) return *ctx_;
  // Connecting takes at most connect_timeout, and never past the call's deadline.
  const auto deadline = hiredis_detail::step_deadline(command_timeout_);
  if (passed(deadline)) {
    throw TimeoutError(fmt::format("the call's deadline passed before connecting to {}", describe(endpoint_)));
  }
  std::chrono::microseconds limit = connect_timeout_;
  if (deadline != hiredis_detail::no_deadline()) {
    const auto left = time_left(deadline);
    limit = limit.count() > 0 ? std::min(limit, left) : left;
  }
  ctx_.reset(open_context(limit));
  shortened_ = false;
  unanswered_ = true;
  if (ctx_->err) fail("connecting to");
  if (hiredis_detail::connected_to_itself(ctx_->fd)) {
    ctx_.reset();  // self_connect.hpp; not fail(): no TLS hint applies, nothing was sent
    throw ConnectionError(hiredis_detail::reached_itself(describe(endpoint_)));
  }
  if (hiredis_detail::Interrupt* interrupt = hiredis_detail::current_interrupt();
      interrupt && !interrupt->adopt(ctx_->fd)) {
    ctx_.reset();
    throw ConnectionError(fmt::format("connecting to {}: stopped", describe(endpoint_)));
  }
  if (tls_) start_tls(limit);
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
      // Never the command's arguments: AUTH's are the credentials. The user is named (the password
      // never is): the first thing to check in a refusal is which ACL user was tried.
      const std::string who = cmd[0] != "AUTH" ? std::string()
                               : fmt::format(" as user \"{}\"", endpoint_.username.empty()
                                                                    ? std::string("default")
                                                                    : detail::printable(endpoint_.username));
      throw AuthError(fmt::format("{}{} on {} failed: {}", cmd[0], who, describe(endpoint_), r.str));
    }
  }
  ++connects_;
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

// The socket timeout is command_timeout on every context (set once, at connect). Only when the
// call has less time left than that is it shortened for one round trip, and restored after: the
// common case costs no setsockopt. After a failure the context is dropped, shortened or not.
void RedisConnection::arm_deadline(redisContext& c) {
  const auto deadline = hiredis_detail::step_deadline(command_timeout_);
  if (deadline == hiredis_detail::no_deadline()) return;
  if (passed(deadline)) {  // nothing sent: the context stays as it is
    throw TimeoutError(fmt::format("the call's deadline passed before a command to {}", describe(endpoint_)));
  }
  const auto left = time_left(deadline);
  if (command_timeout_.count() > 0 && left + kSlack >= command_timeout_) return;
  if (redisSetTimeout(&c, to_timeval(left)) != REDIS_OK) fail("setting the command timeout on");
  shortened_ = true;
}

// A socket timeout bounds one read or write, not their sum: a round trip whose replies come in
// parts 100 ms apart under a timeout of 300 ms would wait for all of them. So before each wait past
// its first, the socket's timeout becomes the call's time left; once the deadline has passed, only
// what has already arrived (poll, no wait) is still read or written, and then the call times out.
void RedisConnection::bound_wait(redisContext& c, short events, const char* during) {
  const auto deadline = hiredis_detail::step_deadline(command_timeout_);
  if (deadline == hiredis_detail::no_deadline()) return;
  if (passed(deadline)) {
    pollfd ready{c.fd, events, 0};
    if (::poll(&ready, 1, 0) <= 0) {
      ctx_.reset();  // half a pipeline may be unread: never reuse this stream
      throw TimeoutError(fmt::format("{} {}: the call's deadline passed", during, describe(endpoint_)));
    }
  }
  if (redisSetTimeout(&c, to_timeval(time_left(deadline))) != REDIS_OK) fail("setting the command timeout on");
  shortened_ = true;
}

void RedisConnection::disarm_deadline(redisContext& c) {
  if (!shortened_) return;
  if (redisSetTimeout(&c, to_timeval(command_timeout_)) != REDIS_OK) fail("setting the command timeout on");
  shortened_ = false;
}

Reply RedisConnection::command(const std::vector<std::string>& args) {
  if (args.empty()) throw InvalidArgument("empty command");
  CallScope call(*this);  // a command outside any call is a call of its own
  // A pipeline of one, so that its reply is read by the call's deadline too (read_replies).
  const std::vector<const std::vector<std::string>*> one{&args};
  std::vector<Reply> replies;
  pipeline(one, replies);
  return std::move(replies.front());
}

std::vector<Reply> RedisConnection::pipeline(const std::vector<std::vector<std::string>>& commands) {
  std::vector<const std::vector<std::string>*> refs;
  refs.reserve(commands.size());
  for (const auto& args : commands) refs.push_back(&args);
  std::vector<Reply> replies;
  pipeline(refs, replies);
  return replies;
}

void RedisConnection::pipeline(const std::vector<const std::vector<std::string>*>& commands,
                               std::vector<Reply>& replies) {
  if (commands.empty()) return;
  CallScope call(*this);
  send(commands);
  read_replies(*ctx_, commands.size(), replies);
}

void RedisConnection::send(const std::vector<const std::vector<std::string>*>& commands) {
  // Checked before anything is appended: a command left in the context's output buffer would go
  // out with the next call, whose replies would then be read one step behind.
  for (const auto* args : commands) {
    if (args->empty()) throw InvalidArgument("empty command in pipeline");
  }
  CallScope call(*this);
  redisContext& c = context();
  arm_deadline(c);
  for (const auto* p : commands) {
    const std::vector<std::string>& args = *p;
    Argv argv(args);
    if (redisAppendCommandArgv(&c, static_cast<int>(args.size()), argv.ptrs.data(), argv.lens.data()) != REDIS_OK) {
      fail("pipelining to");
    }
  }
  // Out now, not at the first read: the server starts on them while the caller writes elsewhere.
  int done = 0;
  for (bool first = true; !done; first = false) {
    if (!first) bound_wait(c, POLLOUT, "writing a pipeline to");
    if (redisBufferWrite(&c, &done) != REDIS_OK) fail("writing a pipeline to");
  }
}

void RedisConnection::receive(std::size_t count, std::vector<Reply>& replies) {
  if (count == 0) return;
  if (!ctx_) throw ConnectionError(fmt::format("no pipeline sent to {} to read", describe(endpoint_)));
  CallScope call(*this);
  rearm_deadline(*ctx_);
  read_replies(*ctx_, count, replies);
}

// Polls rather than letting hiredis's socket timeout wait: a timeout of hiredis's own breaks the
// context, and a quiet subscription is no broken connection.
bool RedisConnection::await_push(std::chrono::milliseconds wait, Reply& out, int wake_fd) {
  if (!ctx_) throw ConnectionError(fmt::format("no connection to {} to read from", describe(endpoint_)));
  redisContext& c = *ctx_;
  void* raw = nullptr;
  if (redisGetReplyFromReader(&c, &raw) != REDIS_OK) fail("reading from");
  if (raw == nullptr) {
    pollfd fds[2] = {{c.fd, POLLIN, 0}, {wake_fd, POLLIN, 0}};
    const int ready = ::poll(fds, wake_fd >= 0 ? 2 : 1, static_cast<int>(wait.count()));
    if (ready < 0 && errno != EINTR) fail("waiting for a message from", std::strerror(errno));
    if (ready <= 0 || fds[0].revents == 0) return false;
    // A message begun is read to its end within command_timeout (the context's socket timeout).
    CallScope call(*this);
    while (raw == nullptr) {
      if (redisBufferRead(&c) != REDIS_OK || redisGetReplyFromReader(&c, &raw) != REDIS_OK) fail("reading from");
    }
  }
  ReplyPtr reply(static_cast<redisReply*>(raw));
  out = detail::from_hiredis(*reply);
  return true;
}

void RedisConnection::disconnect() noexcept { ctx_.reset(); }

void RedisConnection::rearm_deadline(redisContext& c) {
  const auto deadline = hiredis_detail::step_deadline(command_timeout_);
  if (deadline == hiredis_detail::no_deadline()) return;
  // Past the deadline the replies may still be waiting in the socket's buffer: the shortest
  // timeout (1 ms) reads them, and fails only when they are not there.
  const auto left = time_left(deadline);
  if (!shortened_ && command_timeout_.count() > 0 && left + kSlack >= command_timeout_) return;
  if (redisSetTimeout(&c, to_timeval(left)) != REDIS_OK) fail("setting the command timeout on");
  shortened_ = true;
}

// redisGetReply's reading half, with the call's deadline checked before every socket read but the
// first (bound_wait): Redis answers a long pipeline in parts, other clients' commands between them.
void RedisConnection::read_replies(redisContext& c, std::size_t count, std::vector<Reply>& out) {
  out.reserve(out.size() + count);
  bool waited = false;  // a socket read of this round trip made already: the next one is bounded
  bool refused = false;
  for (std::size_t i = 0; i < count; ++i) {
    void* raw = nullptr;
    if (redisGetReplyFromReader(&c, &raw) != REDIS_OK) fail("reading pipelined replies from");
    while (raw == nullptr) {
      if (waited) bound_wait(c, POLLIN, "reading pipelined replies from");
      waited = true;
      if (redisBufferRead(&c) != REDIS_OK || redisGetReplyFromReader(&c, &raw) != REDIS_OK) {
        fail("reading pipelined replies from");
      }
    }
    ReplyPtr reply(static_cast<redisReply*>(raw));
    unanswered_ = false;
    refused = refused || detail::is_error_code(*reply, "READONLY");  // a replica: see below
    out.push_back(detail::from_hiredis(*reply));
  }
  disarm_deadline(c);
  // A replica's refusal: the server this connection reached is no master now (a failover demoted
  // it). Every reply is read, so the connection is let go and the next command connects again, which
  // resolves the endpoint's name again: a managed Redis moves its primary endpoint's DNS name to the
  // promoted replica, and a connection kept to the old node would be refused for as long as it lived.
  if (refused) disconnect();
}

}  // namespace redlimit

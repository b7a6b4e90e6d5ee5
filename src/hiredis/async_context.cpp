// AsyncRedis::Core and its hiredis context: opening one (AUTH and SELECT queued first), handing it
// commands, the callbacks hiredis runs (replies, connect, disconnect), and freeing contexts only
// where hiredis allows it. See async_core.hpp for the rules kept here.
#include <fmt/format.h>

#include <algorithm>
#include <string_view>
#include <utility>

#include "async_core.hpp"
#include "hiredis_reply.hpp"
#include "redlimit/detail/message.hpp"
#include "redlimit/errors.hpp"
#include "self_connect.hpp"
#include "tcp_connect.hpp"

namespace redlimit {

using hiredis_detail::describe;
using async_detail::SteadyClock;

void AsyncRedis::Core::send(Item& item, std::exception_ptr& connect_error) {
  if (connect_error) {
    fail(item.on_error, connect_error);
    return;
  }
  Conn* conn = nullptr;
  try {
    conn = connection();
  } catch (...) {
    connect_error = std::current_exception();
    fail(item.on_error, connect_error);
    return;
  }
  auto pending = std::make_unique<Pending>();
  pending->on_reply = std::move(item.on_reply);
  pending->on_error = std::move(item.on_error);
  pending->deadline = item.deadline;
  if (!issue(*conn, item.argv, pending.get())) {
    const std::string why = conn->ac && conn->ac->errstr ? conn->ac->errstr : "context unusable";
    fail(pending->on_error,
         std::make_exception_ptr(ConnectionError(fmt::format("sending to {}: {}", describe(target_), why))));
    return;
  }
  if (watch_ && !item.resent) pending->argv = std::move(item.argv);  // (send_again)
  pending.release();  // hiredis owns it now, until its callback (on_reply takes it back)
  ++commands_;
  if (conn->inflight.size() > max_in_flight_.load(std::memory_order_relaxed)) {
    max_in_flight_.store(conn->inflight.size(), std::memory_order_relaxed);
  }
}

// Hands one command to hiredis (it is written when the socket is writable).
bool AsyncRedis::Core::issue(Conn& conn, const std::vector<std::string>& args, Pending* pending) {
  std::vector<const char*> ptrs;
  std::vector<std::size_t> lens;
  ptrs.reserve(args.size());
  lens.reserve(args.size());
  for (const auto& a : args) {
    ptrs.push_back(a.data());
    lens.push_back(a.size());
  }
  if (redisAsyncCommandArgv(conn.ac.get(), &Core::on_reply, pending, static_cast<int>(args.size()), ptrs.data(),
                            lens.data()) != REDIS_OK) {
    return false;
  }
  conn.inflight.push_back({SteadyClock::now(), pending});
  if (conn.inflight.size() == 1) {
    if (const auto due = reply_due(conn)) arm_by(*due);
  }
  if (has_deadline(pending->deadline)) arm_by(pending->deadline);
  return true;
}

// `pending` has had its callback: hiredis no longer holds it. It is the oldest (hiredis answers in
// order, and frees a context's commands in order too); the search is a safeguard.
void AsyncRedis::Core::forget(Conn& conn, const Pending* pending) {
  auto& q = conn.inflight;
  if (!q.empty() && q.front().pending == pending) {
    q.pop_front();
    return;
  }
  const auto it = std::find_if(q.begin(), q.end(), [pending](const Sent& s) { return s.pending == pending; });
  if (it != q.end()) q.erase(it);
}

// The current connection, opened (with AUTH / SELECT queued first) if there is none.
AsyncRedis::Core::Conn* AsyncRedis::Core::connection() {
  if (conn_) return conn_.get();
  auto conn = std::make_unique<Conn>(*this);
  // The addresses pump() waited for (waiting_for_address, async_lookup.cpp), used once.
  redisAsyncContext* raw = target_.unix_path.empty() ? hiredis_detail::async_connect_context(target_, addresses_.get())
                                                     : redisAsyncConnectUnix(target_.unix_path.c_str());
  addresses_.reset();
  if (raw == nullptr) throw ConnectionError(fmt::format("cannot allocate a connection to {}", describe(target_)));
  conn->ac.reset(raw);
  if (raw->err) throw ConnectionError(fmt::format("connecting to {}: {}", describe(target_), raw->errstr));
  if (tls_) {
    // Only begun here (the socket is still connecting): hiredis's SSL read and write handlers finish
    // the handshake, and a refused certificate shows as a broken connection (reply_error says why).
    // On loopback the socket may already be connected and the handshake done here: a refused
    // certificate is then known at once, and is the same TlsError as when the loop finds it.
    std::string why;
    const auto started = tls_->start(raw->c, why, &conn->ssl);
    if (started == hiredis_detail::Tls::Start::refused) {
      throw TlsError(fmt::format("handshake with {}: {}", describe(target_), why));
    }
    if (started != hiredis_detail::Tls::Start::ok) {
      throw ConnectionError(fmt::format("TLS with {}: {}", describe(target_), why));
    }
  }
  raw->data = conn.get();
  if (!attach(raw)) {
    throw ConnectionError(fmt::format("cannot attach the connection to {} to the event loop", describe(target_)));
  }
  redisAsyncSetConnectCallback(raw, &Core::on_connect);
  redisAsyncSetDisconnectCallback(raw, &Core::on_disconnect);
#if defined(HIREDIS_MAJOR) && HIREDIS_MAJOR >= 1
  // hiredis >= 1.0 also watches for a silent server itself (no reply for this long) where the
  // adapter schedules its timer (libevent; our libuv adapter does not); our own per-command
  // deadline stays, as it is what holds on hiredis 0.14 and on libuv.
  if (options_.command_timeout.count() > 0) {
    redisAsyncSetTimeout(raw, async_detail::to_timeval(
                                  std::chrono::duration_cast<std::chrono::microseconds>(options_.command_timeout)));
  }
#endif
  ++connections_;
  if (options_.connect_timeout.count() > 0) {
    conn->connect_deadline = SteadyClock::now() + options_.connect_timeout;
    arm_by(*conn->connect_deadline);
  }
  queue_setup(*conn);
  conn_ = std::move(conn);
  return conn_.get();
}

// AUTH and SELECT from the Endpoint, ahead of every command on a new connection. Their replies go to
// replied(), which drops the connection if one fails.
void AsyncRedis::Core::queue_setup(Conn& conn) {
  std::vector<std::pair<const char*, std::vector<std::string>>> setup;
  if (!target_.password.empty()) {
    if (target_.username.empty()) {
      setup.push_back({"AUTH", {"AUTH", target_.password}});
    } else {
      setup.push_back({"AUTH", {"AUTH", target_.username, target_.password}});
    }
  }
  if (target_.db != 0) setup.push_back({"SELECT", {"SELECT", std::to_string(target_.db)}});
  for (const auto& [what, argv] : setup) {
    auto pending = std::make_unique<Pending>();
    pending->setup = what;
    if (!issue(conn, argv, pending.get())) {
      throw ConnectionError(fmt::format("cannot send {} to {}", what, describe(target_)));
    }
    pending.release();  // hiredis owns it now, until its callback
  }
}

// Drops the current connection from a top-level handler: every pending command fails now.
void AsyncRedis::Core::drop(std::string why, bool timed_out) {
  std::unique_ptr<Conn> conn = std::move(conn_);
  if (watch_) need_master_ = true;  // as in retire()
  conn->failure = std::move(why);
  conn->timed_out = timed_out;
  conn->ac.reset();  // redisAsyncFree: the pending callbacks run with a null reply
}

// Inside a hiredis callback: `conn` stops being current; it is freed at the next top-level handler.
void AsyncRedis::Core::retire(Conn& conn) {
  if (conn_.get() == &conn) {
    graveyard_.push_back(std::move(conn_));
    if (watch_) need_master_ = true;  // a master's connection ended: the sentinels are asked first
  }
  arm(SteadyClock::now());
}

// Contexts retired inside callbacks are freed here, at the top level.
void AsyncRedis::Core::collect_garbage() {
  auto dead = std::move(graveyard_);
  graveyard_.clear();
  dead.clear();  // may run callbacks (with a null reply); they can only queue more work
}

void AsyncRedis::Core::replied(Conn& conn, const redisAsyncContext* ac, const redisReply* reply,
                               std::unique_ptr<Pending> p) {
  forget(conn, p.get());
  if (reply != nullptr && options_.command_timeout.count() > 0) conn.last_reply = SteadyClock::now();
  const bool room = options_.max_in_flight == 0 || conn.inflight.size() <= options_.max_in_flight / 2;
  if (!backlog_.empty() && conn_.get() == &conn && room && !head_expired(conn) &&
      !(timer_armed_ && timer_at_ == TimePoint{})) {
    arm(TimePoint{});  // room again: the timer (at the top level) sends more of the backlog
  }
  // A refusal of any command (an expired one's too) tells that this server no longer serves us.
  const bool refused = reply != nullptr && refused_by(conn, reply);
  if (p->expired) {  // failed at its deadline already (expire_calls): its outcome stays unknown
    leave_when_drained(conn);
    return;
  }
  if (p->setup != nullptr) {
    if (reply != nullptr && reply->type == REDIS_REPLY_ERROR && conn.failure.empty()) {
      // The commands queued behind it must not run unauthenticated or on the wrong db.
      // The ACL user is named, never the password (as RedisConnection does).
      const std::string who = std::string_view(p->setup) != "AUTH" ? std::string()
                              : target_.username.empty()
                                  ? std::string(" as user \"default\"")
                                  : fmt::format(" as user \"{}\"", detail::printable(target_.username));
      conn.failure =
          fmt::format("{}{} on {} failed: {}", p->setup, who, describe(target_), std::string(reply->str, reply->len));
      retire(conn);
    }
    return;
  }
  if (refused && send_again(*p)) {
    leave_when_drained(conn);
    return;
  }
  const std::exception_ptr error = reply_error(conn, ac, reply);
  try {  // a call its callback makes waits for the next master when this one refused (refused_by)
    if (error) {
      p->on_error(error);
    } else {
      p->on_reply(detail::from_hiredis(*reply));
    }
  } catch (...) {  // must not unwind through hiredis
  }
  leave_when_drained(conn);
}

// Why a command got no reply of its own: the connection was dropped (conn.failure), or hiredis freed
// the context (a null reply). Null when `reply` is the command's reply.
std::exception_ptr AsyncRedis::Core::reply_error(const Conn& conn, const redisAsyncContext* ac,
                                                 const redisReply* reply) const {
  if (!conn.failure.empty()) {
    return conn.timed_out ? std::make_exception_ptr(TimeoutError(conn.failure))
                          : std::make_exception_ptr(ConnectionError(conn.failure));
  }
  if (reply != nullptr) return nullptr;
  if (conn.ssl != nullptr) {  // alive until hiredis frees the context, after these callbacks
    if (const std::string refused = hiredis_detail::Tls::refusal(*conn.ssl); !refused.empty()) {
      return std::make_exception_ptr(TlsError(fmt::format("handshake with {}: {}", describe(target_), refused)));
    }
  }
  const std::string why = ac->err ? ac->errstr : "connection closed";
#ifdef REDIS_ERR_TIMEOUT
  if (ac->err == REDIS_ERR_TIMEOUT) {
    return std::make_exception_ptr(TimeoutError(fmt::format("{}: {}", describe(target_), why)));
  }
#endif
  return std::make_exception_ptr(ConnectionError(fmt::format("{}: {}", describe(target_), why)));
}

void AsyncRedis::Core::on_reply(redisAsyncContext* ac, void* reply, void* privdata) {
  std::unique_ptr<Pending> p(static_cast<Pending*>(privdata));  // given to hiredis by send / queue_setup
  auto* conn = static_cast<Conn*>(ac->data);
  const InLoop in_loop(conn->core.loop());
  conn->core.replied(*conn, ac, static_cast<const redisReply*>(reply), std::move(p));
}

void AsyncRedis::Core::on_connect(const redisAsyncContext* ac, int status) {
  auto* conn = static_cast<Conn*>(ac->data);
  if (status == REDIS_OK && hiredis_detail::connected_to_itself(ac->c.fd)) {
    // Refused, as RedisConnection does (self_connect.hpp). The commands hiredis writes next come
    // back as "replies": conn.failure makes each an error instead, and the context is freed at the
    // next top-level handler.
    conn->failure = hiredis_detail::reached_itself(describe(conn->core.target_));
    conn->core.retire(*conn);
    return;
  }
  if (status == REDIS_OK) {
    conn->connected = true;
    return;
  }
  // hiredis frees the context right after this (failing the pending commands with its error).
  (void)conn->ac.release();
  conn->core.retire(*conn);
}

void AsyncRedis::Core::on_disconnect(const redisAsyncContext* ac, int /*status*/) {
  auto* conn = static_cast<Conn*>(ac->data);
  (void)conn->ac.release();  // hiredis frees it when we return (a no-op when we are freeing it)
  conn->connected = false;
  conn->core.retire(*conn);
}

// -READONLY (a master demoted to replica; with Sentinel, -LOADING too: a server loading its data)
// refused the command before it ran: this server does not serve us now. Nothing more is sent on the
// connection, and it is let go once its other commands have answered (leave_when_drained); the next
// one connects again, which for one server resolves its host name again (a managed Redis moves its
// primary endpoint's name to the promoted replica). With Sentinel the sentinels are asked at once,
// and each refused command is sent again to the master found (send_again), where letting the
// connection go at the first refusal would leave the others' outcome unknown and fail them.
bool AsyncRedis::Core::refused_by(Conn& conn, const redisReply* reply) {
  if (conn_.get() != &conn || !conn.failure.empty()) return false;
  if (!detail::is_error_code(*reply, "READONLY") && !(watch_ && detail::is_error_code(*reply, "LOADING"))) {
    return false;
  }
  if (!conn.refused) {
    conn.refused = true;
    if (watch_) {
      need_master_ = true;
      if (!searching_) search(false);
    }
  }
  return true;
}

// pump(), before a command: true while the connection is refused and still draining (resumed by
// leave_when_drained). A Sentinel search that failed meanwhile is started again.
bool AsyncRedis::Core::held_by_refusal() {
  if (!conn_ || !conn_->refused) return false;
  if (watch_ && need_master_ && !searching_) search(false);
  return true;
}

// A refused command (refused_by) goes back to the backlog, behind those refused before it and ahead
// of everything else, to wait for the master: once, and only while its call has time left and the
// Core is not closing (a command queued then might outlive the loop). False: its caller gets the
// refusal, an outage reply for its failure policy.
bool AsyncRedis::Core::send_again(Pending& p) {
  if (p.argv.empty() || shutting_down_) return false;
  if (has_deadline(p.deadline) && SteadyClock::now() >= p.deadline) return false;
  Item item;
  item.argv = std::move(p.argv);
  item.on_reply = std::move(p.on_reply);
  item.on_error = std::move(p.on_error);
  item.deadline = p.deadline;
  item.resent = true;
  const auto behind = std::find_if(backlog_.begin(), backlog_.end(), [](const Item& i) { return !i.resent; });
  backlog_.insert(behind, std::move(item));
  ++resent_;
  return true;
}

// A refused connection with no command left on it is let go. Unlike retire(), the sentinels are not
// asked again for it: the search its refusal started (refused_by) says where the next one goes.
void AsyncRedis::Core::leave_when_drained(Conn& conn) {
  if (!conn.refused || !conn.inflight.empty() || conn_.get() != &conn) return;
  conn.failure = watch_ ? fmt::format("{} refused our commands: not the master \"{}\" now", describe(target_),
                                      detail::printable(master_name_))
                        : fmt::format("{} refused our commands: a replica now", describe(target_));
  graveyard_.push_back(std::move(conn_));
  arm(SteadyClock::now());  // the backlog goes on at the top level (or waits for the search)
}

}  // namespace redlimit

// AsyncCluster: the asynchronous API routed by slot, one AsyncConnection per master, redirects
// followed within each call's deadline (redlimit/transport/async_cluster.hpp).
#include "redlimit/transport/async_cluster.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <utility>

#include "endpoint_text.hpp"
#include "redlimit/detail/keys.hpp"
#include "redlimit/errors.hpp"

namespace redlimit {

namespace {

// The slot map's own connection: its timeouts are the async ones; it raises (there is no decision
// to answer with a policy here: a call that cannot be routed fails, and its limiter's policy answers).
Options map_options(const AsyncOptions& a) {
  Options o;
  o.connect_timeout = a.connect_timeout;
  o.command_timeout = a.command_timeout;
  o.on_failure = OnFailure::raise;
  return o;
}

}  // namespace

struct AsyncCluster::Call {
  std::vector<std::string> argv;  // kept to send again after MOVED / ASK
  std::uint16_t slot = 0;
  ReplyCallback on_reply;
  ErrorCallback on_error;
  Deadline deadline;
  int redirects = 0;
  int retries = 0;      // TRYAGAIN / CLUSTERDOWN met so far
  bool keyed = true;    // false: one master's share of a command sent to every master
};

AsyncCluster::AsyncCluster(ClusterEndpoint seeds, Connect connect, AsyncOptions options)
    : map_(std::make_shared<ClusterConnection>(std::move(seeds), map_options(options))),
      connect_(std::move(connect)),
      options_(options) {
  if (!connect_) throw InvalidArgument("AsyncCluster needs a way to connect to a master");
  set_script_path(ScriptPath::probe);  // the library goes to every master (broadcast)
}

std::shared_ptr<AsyncCluster> AsyncCluster::attach(ClusterEndpoint seeds, Connect connect, AsyncOptions options) {
  auto cluster = std::make_shared<AsyncCluster>(std::move(seeds), std::move(connect), options);
  cluster->connect_masters();
  return cluster;
}

std::shared_ptr<AsyncCluster> AsyncCluster::attach_libevent(event_base* base, ClusterEndpoint seeds,
                                                            AsyncOptions options) {
  if (base == nullptr) throw InvalidArgument("attach_libevent: null event_base");
  return attach(
      std::move(seeds),
      [base, options](const Endpoint& e) -> std::shared_ptr<AsyncConnection> {
        return AsyncRedis::attach_libevent(base, e, options);
      },
      options);
}

std::shared_ptr<AsyncCluster> AsyncCluster::attach_libuv(uv_loop_s* loop, ClusterEndpoint seeds, AsyncOptions options) {
  if (loop == nullptr) throw InvalidArgument("attach_libuv: null loop");
  return attach(
      std::move(seeds),
      [loop, options](const Endpoint& e) -> std::shared_ptr<AsyncConnection> {
        return AsyncRedis::attach_libuv(loop, e, options);
      },
      options);
}

// On the caller's thread, which attach_* requires to be the loop's (or the loop not running yet).
void AsyncCluster::connect_masters() {
  for (const Endpoint& e : map()->master_endpoints()) {
    auto conn = connect_(e);
    std::lock_guard<std::mutex> lock(mutex_);
    masters_.emplace(hiredis_detail::describe(e), Master{e, std::move(conn)});
  }
}

void AsyncCluster::command_async(std::vector<std::string> argv, ReplyCallback on_reply, ErrorCallback on_error) {
  command_async_until(std::move(argv), std::move(on_reply), std::move(on_error), call_deadline());
}

AsyncCluster::Deadline AsyncCluster::call_deadline() const {
  if (options_.command_timeout.count() <= 0) return {};
  return std::chrono::steady_clock::now() + options_.command_timeout;
}

void AsyncCluster::command_async_until(std::vector<std::string> argv, ReplyCallback on_reply, ErrorCallback on_error,
                                       Deadline deadline) {
  if (argv.empty()) throw InvalidArgument("empty command");
  if (!on_reply || !on_error) throw InvalidArgument("command_async needs both callbacks");
  if (to_every_master(argv)) {
    broadcast(std::move(argv), std::move(on_reply), std::move(on_error), deadline);
    return;
  }
  auto call = std::make_shared<Call>();
  call->slot = static_cast<std::uint16_t>(std::max(0, command_slot(argv)));
  call->argv = std::move(argv);
  call->on_reply = std::move(on_reply);
  call->on_error = std::move(on_error);
  call->deadline = deadline;
  Endpoint to;
  try {
    to = target(call->slot);
  } catch (const ConnectionError&) {  // no master to send to: nothing was sent
    call->on_error(std::current_exception());
    return;
  }
  route(call, to, false);
}

void AsyncCluster::route(const std::shared_ptr<Call>& call, const Endpoint& to, bool asking) {
  auto self = shared_from_this();
  // The reply of the command, or its redirect followed (it did not run where it was sent).
  // The caller's on_reply runs outside the try: what it throws is its own (the connection drops it,
  // as it does for every callback), never an on_error after it, which would be a second outcome.
  auto on_reply = [self, call](Reply reply) {
    try {
      if (ClusterConnection::asks_to_wait(reply) && self->retry_later(call)) return;
      bool ask = false;
      std::optional<Endpoint> next;
      if (call->redirects < ClusterConnection::max_redirects())
        next = self->map()->redirected_to(reply, call->slot, ask);
      if (next) {
        ++call->redirects;
        self->route(call, *next, ask);
        return;
      }
    } catch (...) {  // the next send was refused: nothing of this call is queued any more
      call->on_error(std::current_exception());
      return;
    }
    call->on_reply(std::move(reply));
  };
  // A failure in transit (the master stopped answering, its connection broke): the call's outcome
  // is unknown and it is not sent again, but the map is read again for the calls that follow.
  auto on_error = [self, call, to](std::exception_ptr e) {
    try {
      std::rethrow_exception(e);
    } catch (const ConnectionError&) {
      self->relearn(hiredis_detail::describe(to));
    } catch (...) {
    }
    call->on_error(std::move(e));
  };
  auto send = [call, asking, on_reply, on_error](AsyncConnection& conn) {
    // ASKING applies to the next command on its connection: queued right before it.
    if (asking)
      conn.command_async_until(
          {"ASKING"}, [](const Reply&) {}, [](const std::exception_ptr&) {}, call->deadline);
    conn.command_async_until(call->argv, on_reply, on_error, call->deadline);
  };
  if (auto conn = connection_to(to)) {
    send(*conn);
    return;
  }
  // A master met after attach: its connection is made on the loop's thread.
  auto loop = any_connection();
  if (!loop) throw ConnectionError("no connection of this AsyncCluster is open to reach its event loop");
  loop->post([self, call, to, send] {
    try {
      auto made = self->connect_(to);
      {
        std::lock_guard<std::mutex> lock(self->mutex_);
        made =
            self->masters_.emplace(hiredis_detail::describe(to), Master{to, std::move(made)}).first->second.connection;
      }
      send(*made);
    } catch (...) {
      call->on_error(std::current_exception());
    }
  });
}

Endpoint AsyncCluster::target(std::uint16_t slot) {
  if (auto mapped = map()->mapped_master(slot)) return *mapped;
  relearn(std::string());  // any master may answer
  std::lock_guard<std::mutex> lock(mutex_);
  if (masters_.empty()) throw ConnectionError(fmt::format("no master known to send slot {}'s call to", slot));
  auto it = masters_.begin();
  std::advance(it, static_cast<std::ptrdiff_t>(unmapped_turn_++ % masters_.size()));
  return it->second.endpoint;
}

std::vector<Endpoint> AsyncCluster::every_master() {
  auto out = map()->mapped_masters();
  if (!out.empty()) return out;
  relearn(std::string());
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& master : masters_) out.push_back(master.second.endpoint);
  if (out.empty()) throw ConnectionError("no master known to send the command to");
  return out;
}

// The limiter's map from now on (RateLimiter::attach_async): the masters it names are those the
// limiter's breakers are kept for, and what either path learns (MOVED, a re-read) serves both. A
// connection that is not a cluster's keeps this router's own map.
void AsyncCluster::share_routing(const std::shared_ptr<Connection>& limiter_connection) {
  auto shared = std::dynamic_pointer_cast<ClusterConnection>(limiter_connection);
  if (!shared) return;
  std::lock_guard<std::mutex> lock(mutex_);
  map_ = std::move(shared);
}

std::shared_ptr<ClusterConnection> AsyncCluster::map() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return map_;
}

// A breaker refused a call for `key`: nothing is sent to its master, so no failure in transit will
// start a re-read (relearn, below) if a failover replaced that master. The refusals start it
// instead, under the same bound (one at a time, at most one every 100 ms), and another master than
// the one the map names for the slot answers it.
void AsyncCluster::shard_refused(std::string_view key) { relearn(map()->node_for_slot(detail::key_slot(key))); }

// A master that failed a call in transit may have been replaced: a failover promotes its replica,
// which no reply of the old master will ever name when that master is down (MOVED comes only from
// a master that answers). So the map is read again, with a CLUSTER SLOTS sent like any command to
// another master, never a blocking read on the loop's thread; one at a time, at most one every
// 100 ms (a dead master fails every call routed to it, and until its replica is promoted the map
// stays as it is). The calls made after the answer go to the slots' owners it names.
// The masters other than `failed` are asked in turn, one re-read after another: one that cannot
// answer either (down as well, or cut off from this client) fails its CLUSTER SLOTS, and the next
// re-read asks the next, where always asking the first by name would ask that one for good.
void AsyncCluster::relearn(const std::string& failed) {
  const auto now = std::chrono::steady_clock::now();
  std::shared_ptr<AsyncConnection> ask;
  std::string host;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (relearning_ || now < next_relearn_) return;
    std::vector<const std::pair<const std::string, Master>*> others;
    for (const auto& master : masters_) {
      if (master.first != failed) others.push_back(&master);
    }
    if (others.empty()) return;
    const auto& [name, master] = *others[relearn_turn_++ % others.size()];
    ask = master.connection;
    host = name.substr(0, name.rfind(':'));
    relearning_ = true;
    next_relearn_ = now + std::chrono::milliseconds(100);
  }
  auto self = shared_from_this();
  const auto done = [self] {
    std::lock_guard<std::mutex> lock(self->mutex_);
    self->relearning_ = false;
  };
  try {
    ask->command_async_until(
        {"CLUSTER", "SLOTS"},
        [self, host, done](const Reply& slots) {
          self->map()->learn_slots(slots, host);
          done();
        },
        [done](const std::exception_ptr&) { done(); }, call_deadline());
  } catch (...) {  // the command was refused before it was queued: the next failure tries again
    done();
  }
}

// TRYAGAIN / CLUSTERDOWN: the command did not run. As on the synchronous path, it is sent again from
// the slot's owner (which says where the keys are by then) after 10, 20, 40, 80, then 100 ms, at most
// ClusterConnection::max_retries() times, and never when the wait would end past the call's deadline;
// the wait is on the loop's timer (post_after), so the loop goes on meanwhile. The map is not read
// again here: a slot whose owner changed answers MOVED, which the map learns. False: the reply is the call's, an outage
// for its failure policy.
bool AsyncCluster::retry_later(const std::shared_ptr<Call>& call) {
  if (!call->keyed || call->retries >= ClusterConnection::max_retries()) return false;
  const auto wait = ClusterConnection::retry_wait(call->retries + 1);
  if (call->deadline != Deadline{} && std::chrono::steady_clock::now() + wait >= call->deadline) return false;
  auto loop = any_connection();
  if (!loop) return false;
  ++call->retries;
  call->redirects = 0;
  auto self = shared_from_this();
  loop->post_after(wait, [self, call] {
    try {
      self->route(call, self->target(call->slot), false);
    } catch (...) {  // nothing of this call is queued any more
      call->on_error(std::current_exception());
    }
  });
  return true;
}

// Every master's answer is awaited; the reply is the first error, else the first answer; when no
// master answered at all, the first failure.
void AsyncCluster::broadcast(std::vector<std::string> argv, ReplyCallback on_reply, ErrorCallback on_error,
                             Deadline deadline) {
  std::vector<Endpoint> masters;
  try {
    masters = every_master();
  } catch (const ConnectionError&) {
    on_error(std::current_exception());
    return;
  }
  struct Tally {
    std::mutex mutex;
    std::size_t left = 0;
    bool answered = false;
    Reply reply;
    std::exception_ptr error;
    ReplyCallback on_reply;
    ErrorCallback on_error;
  };
  auto tally = std::make_shared<Tally>();
  tally->left = masters.size();
  tally->on_reply = std::move(on_reply);
  tally->on_error = std::move(on_error);
  const auto settle = [tally](Reply* reply, std::exception_ptr error) {
    {
      std::lock_guard<std::mutex> lock(tally->mutex);
      if (reply != nullptr && replaces_every_master_reply(*reply, tally->reply, tally->answered)) {
        tally->reply = std::move(*reply);
        tally->answered = true;
      }
      if (error && !tally->error) tally->error = error;
      if (--tally->left > 0) return;
    }
    if (tally->answered) {
      tally->on_reply(std::move(tally->reply));
    } else {
      tally->on_error(tally->error);
    }
  };
  for (const Endpoint& e : masters) {
    auto call = std::make_shared<Call>();
    call->argv = argv;
    call->redirects = ClusterConnection::max_redirects();  // keyless: nothing to follow
    call->keyed = false;
    call->on_reply = [settle](Reply r) { settle(&r, nullptr); };
    call->on_error = [settle](std::exception_ptr x) { settle(nullptr, std::move(x)); };
    call->deadline = deadline;
    try {
      route(call, e, false);
    } catch (...) {
      call->on_error(std::current_exception());
    }
  }
}

std::shared_ptr<AsyncConnection> AsyncCluster::connection_to(const Endpoint& e) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = masters_.find(hiredis_detail::describe(e));
  return it == masters_.end() ? nullptr : it->second.connection;
}

std::shared_ptr<AsyncConnection> AsyncCluster::any_connection() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return masters_.empty() ? nullptr : masters_.begin()->second.connection;
}

void AsyncCluster::post(std::function<void()> task) {
  if (!task) throw InvalidArgument("post needs a task");
  if (auto conn = any_connection()) {
    conn->post(std::move(task));
    return;
  }
  task();
}

void AsyncCluster::post_after(std::chrono::milliseconds delay, std::function<void()> task) {
  if (!task) throw InvalidArgument("post_after needs a task");
  if (auto conn = any_connection()) {
    conn->post_after(delay, std::move(task));
    return;
  }
  task();
}

// The posted tasks wait on one master's connection and queue commands for any master: a second
// pass sends what the first pass's tasks queued on masters it had already passed.
void AsyncCluster::send_now() {
  std::vector<std::shared_ptr<AsyncConnection>> conns;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& master : masters_) conns.push_back(master.second.connection);
  }
  for (int pass = 0; pass < 2; ++pass) {
    for (const auto& conn : conns) conn->send_now();
  }
}

std::size_t AsyncCluster::connections() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return masters_.size();
}

}  // namespace redlimit

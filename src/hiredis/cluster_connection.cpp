#include "redlimit/transport/cluster_connection.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <thread>

#include "call_deadline.hpp"
#include "endpoint_text.hpp"
#include "redlimit/detail/keys.hpp"
#include "redlimit/errors.hpp"

namespace redlimit {

namespace {

bool starts_with(const std::string& s, std::string_view p) { return s.compare(0, p.size(), p) == 0; }

// "MOVED 3999 127.0.0.1:6381" / "ASK 3999 127.0.0.1:6381" → host, port.
bool redirect_target(const std::string& err, std::string& host, int& port) {
  const std::size_t sp = err.rfind(' ');
  const std::size_t colon = err.rfind(':');
  if (sp == std::string::npos || colon == std::string::npos || colon < sp) return false;
  host = err.substr(sp + 1, colon - sp - 1);
  try {
    port = std::stoi(err.substr(colon + 1));
  } catch (...) {
    return false;
  }
  return !host.empty() && port > 0 && port < 65536;
}

}  // namespace

ClusterConnection::ClusterConnection(ClusterEndpoint endpoint, const Options& options)
    : seeds_(std::move(endpoint)), options_(options) {
  if (seeds_.seeds.empty()) throw InvalidArgument("a cluster needs at least one seed node");
  // Redis Functions when the masters have them: the library goes to every master (to_every_master).
  set_script_path(ScriptPath::probe);
  // rediss-cluster:// options this build cannot use (no TLS; a CA, certificate or key that cannot be
  // read) are an InvalidArgument before any I/O: the first seed's probe in refresh() makes its TLS
  // context before it connects, and refresh() lets InvalidArgument through under every policy.
  // As for one server (RateLimiter::connect): under a policy that answers without Redis the
  // limiter starts while every seed is down, and learns the slots on the first call that reaches one.
  // Refused credentials or a refused certificate (AuthError, TlsError) are configuration: thrown
  // whatever the policy.
  try {
    refresh();
  } catch (const AuthError&) {
    throw;
  } catch (const ConnectionError&) {
    if (options_.on_failure == OnFailure::raise) throw;
  }
}

std::shared_ptr<ClusterConnection::Node> ClusterConnection::node(const std::string& host, int port) {
  // Called with mutex_ held exclusively.
  for (const auto& n : nodes_) {
    if (n->endpoint.host == host && n->endpoint.port == port) return n;
  }
  auto n = std::make_shared<Node>();
  // Credentials and TLS options are the same on every node; a certificate is verified against the
  // host named here (the slot map's, or a MOVED/ASK's), unless tls_server_name names one for all.
  n->endpoint = seeds_.seeds.front();
  n->endpoint.host = host;
  n->endpoint.port = port;
  n->endpoint.db = 0;
  n->pool =
      std::make_shared<ConnectionPool>(n->endpoint, options_.connect_timeout, options_.command_timeout, options_.pool);
  n->shard = nodes_.size() + 1;
  nodes_.push_back(n);
  return n;
}

void ClusterConnection::begin_call(std::chrono::steady_clock::time_point started) {
  hiredis_detail::begin_call(options_.command_timeout, started);
}
void ClusterConnection::end_call() noexcept { hiredis_detail::end_call(); }

std::shared_ptr<ClusterConnection::Node> ClusterConnection::route_fresh(std::uint16_t slot) {
  auto target = route(slot);
  bool suspect = false;
  {
    std::shared_lock<std::shared_mutex> lock(mutex_);
    suspect = suspect_ && suspect_ == target;
  }
  if (!suspect) return target;
  refresh_quietly(target);
  return route(slot);
}

// A slot the map names no owner for is read again; in a map that names others (slots no master
// serves: cluster-require-full-coverage no) at most every 100 ms, the requests in between failing at
// once: each read is a connection and a CLUSTER SLOTS on a cluster that is degraded already, and a
// flood of such requests would otherwise be a flood of both. An empty map is read every time.
std::shared_ptr<ClusterConnection::Node> ClusterConnection::route(std::uint16_t slot) {
  {
    std::shared_lock<std::shared_mutex> lock(mutex_);
    if (slots_[slot]) return slots_[slot];
  }
  {
    std::unique_lock<std::shared_mutex> lock(mutex_);
    if (slots_[slot]) return slots_[slot];  // learned meanwhile
    const auto now = std::chrono::steady_clock::now();
    const bool mapped = std::any_of(slots_.begin(), slots_.end(), [](const auto& n) { return n != nullptr; });
    if (mapped && now < next_unmapped_refresh_) {
      throw ConnectionError(fmt::format("no master serves slot {} (the map was read less than 100 ms ago)", slot));
    }
    next_unmapped_refresh_ = now + std::chrono::milliseconds(100);
  }
  refresh();
  std::shared_lock<std::shared_mutex> lock(mutex_);
  if (!slots_[slot]) throw ConnectionError(fmt::format("no master serves slot {}", slot));
  return slots_[slot];
}

bool ClusterConnection::asks_to_wait(const Reply& r) {
  return r.is_error() && (starts_with(r.str, "TRYAGAIN") || starts_with(r.str, "CLUSTERDOWN"));
}

bool ClusterConnection::redirected(const Reply& r) {
  return r.is_error() && (starts_with(r.str, "MOVED ") || starts_with(r.str, "ASK ") || asks_to_wait(r));
}

Reply ClusterConnection::send(const std::vector<std::string>& argv, std::uint16_t slot) {
  auto target = route_fresh(slot);
  bool asking = false;
  int redirects = 0, retries = 0;
  while (true) {
    Reply reply;
    try {
      if (asking) {
        auto both = target->pool->pipeline({{"ASKING"}, argv});  // one connection: ASKING applies to the next command
        reply = std::move(both.back());
      } else {
        reply = target->pool->command(argv);
      }
    } catch (const ConnectionError&) {
      // The outcome is unknown: do not replay. Learn the new topology for the next call.
      refresh_quietly(target);
      throw;
    }
    asking = false;
    if (!reply.is_error()) return reply;
    if (starts_with(reply.str, "MOVED ") || starts_with(reply.str, "ASK ")) {
      // A chain of redirects with no wait between them is bounded: a slot that keeps bouncing is
      // an outage (the redirect goes to the caller, whose failure policy answers).
      if (++redirects > max_redirects()) return reply;
      bool ask = false;
      const auto next = follow(reply, slot, ask);
      if (!next) return reply;  // a redirect naming no node we can read: the caller's, as it is
      if (ask) {
        target = next;  // this command only; the slot is still being migrated
        asking = true;
      } else {
        // The slot has a new owner: the command goes where MOVED says, not where a map read now
        // says. Mid-reshard a master that has not heard of the move yet still names the old owner,
        // which would answer MOVED again, and again, until max_redirects(). The map is read for
        // the slots that moved with this one; this slot keeps the MOVED's owner.
        refresh_quietly();
        learn_owner(slot, next);
        target = next;
      }
    } else if (asks_to_wait(reply)) {
      // TRYAGAIN: a multi-key command (ours: a batch, or a block's state and marker) on a slot
      // mid-migration whose keys are split between the two nodes, or not all there yet; it can run once the migration
      // ends. Bounded: max_retries, 10..100 ms apart, never past the call's deadline (then the reply goes to the caller
      // as it is: an outage, for the failure policy).
      const auto left = hiredis_detail::left_in_call(options_.command_timeout);
      const auto wait = retry_wait(++retries);
      if (retries > max_retries() || left <= std::chrono::nanoseconds(wait)) return reply;
      std::this_thread::sleep_for(wait);
      redirects = 0;
      if (starts_with(reply.str, "CLUSTERDOWN")) refresh_quietly();
      // From the slot's owner again, not from the node that said TRYAGAIN: after ASK that node does
      // not own the slot (without ASKING it answers MOVED back), and the owner says where the keys
      // are now (ASK again, or the slot itself once the migration is over).
      target = route(slot);
    } else {
      return reply;  // an ordinary error reply (NOSCRIPT included) is the caller's
    }
  }
}

Reply ClusterConnection::command(const std::vector<std::string>& argv) {
  CallScope call(*this);  // a command outside any call is a call of its own
  const int slot = command_slot(argv);
  if (slot >= 0) return send(argv, static_cast<std::uint16_t>(slot));
  if (to_every_master(argv)) return pipeline({argv}).front();
  return every_master().front()->pool->command(argv);  // a keyless command: any master answers it
}

std::size_t ClusterConnection::node_of(std::string_view key) const {
  const std::uint16_t slot = detail::key_slot(key);
  std::shared_lock<std::shared_mutex> lock(mutex_);
  const auto& n = slots_[slot];
  return n ? n->shard : 0;
}

// A scan of the map: for RateLimiter::health(), not on any call's path.
bool ClusterConnection::shard_serves(std::size_t shard) const {
  if (shard == 0) return true;
  std::shared_lock<std::shared_mutex> lock(mutex_);
  return std::any_of(slots_.begin(), slots_.end(), [shard](const auto& n) { return n && n->shard == shard; });
}

void ClusterConnection::shard_refused(std::string_view key) {
  const auto now = std::chrono::steady_clock::now();
  std::shared_ptr<Node> suspect;
  {
    std::unique_lock<std::shared_mutex> lock(mutex_);
    if (now < next_refused_refresh_) return;
    next_refused_refresh_ = now + std::chrono::milliseconds(100);
    suspect = slots_[detail::key_slot(key)];
  }
  CallScope call(*this, now);  // the command_timeout of a call of its own bounds it
  try {
    refresh_avoiding(suspect, false);
  } catch (const Error&) {  // no node answered: the map stays, and the breaker's probe tries later
  }
}

std::string ClusterConnection::node_for_slot(std::uint16_t slot) const {
  std::shared_lock<std::shared_mutex> lock(mutex_);
  const auto& n = slots_[slot % 16384];
  return n ? hiredis_detail::describe(n->endpoint) : std::string();
}

Endpoint ClusterConnection::master_endpoint(std::uint16_t slot) { return route(slot % 16384)->endpoint; }

std::optional<Endpoint> ClusterConnection::mapped_master(std::uint16_t slot) const {
  std::shared_lock<std::shared_mutex> lock(mutex_);
  const auto& n = slots_[slot % 16384];
  if (!n) return std::nullopt;
  return n->endpoint;
}

std::vector<Endpoint> ClusterConnection::mapped_masters() const {
  std::vector<Endpoint> out;
  for (const auto& n : named_masters()) out.push_back(n->endpoint);
  return out;
}

std::vector<std::shared_ptr<ClusterConnection::Node>> ClusterConnection::named_masters() const {
  std::shared_lock<std::shared_mutex> lock(mutex_);
  std::vector<std::shared_ptr<Node>> out;
  for (const auto& s : slots_) {
    if (s && std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
  }
  return out;
}

std::vector<Endpoint> ClusterConnection::master_endpoints() {
  std::vector<Endpoint> out;
  for (const auto& n : every_master()) out.push_back(n->endpoint);
  return out;
}

std::shared_ptr<ClusterConnection::Node> ClusterConnection::follow(const Reply& reply, std::uint16_t slot, bool& ask) {
  ask = false;
  if (!reply.is_error()) return nullptr;
  std::string host;
  int port = 0;
  const bool moved = starts_with(reply.str, "MOVED ") && redirect_target(reply.str, host, port);
  ask = !moved && starts_with(reply.str, "ASK ") && redirect_target(reply.str, host, port);
  if (!moved && !ask) return nullptr;
  std::unique_lock<std::shared_mutex> lock(mutex_);
  auto n = node(host, port);
  if (moved) slots_[slot % 16384] = n;
  return n;
}

void ClusterConnection::learn_owner(std::uint16_t slot, const std::shared_ptr<Node>& owner) {
  std::unique_lock<std::shared_mutex> lock(mutex_);
  slots_[slot % 16384] = owner;
}

std::optional<Endpoint> ClusterConnection::redirected_to(const Reply& reply, std::uint16_t slot, bool& ask) {
  const auto n = follow(reply, slot, ask);
  if (!n) return std::nullopt;
  return n->endpoint;
}

std::vector<std::string> ClusterConnection::masters() const {
  std::vector<std::string> out;
  for (const auto& n : named_masters()) out.push_back(hiredis_detail::describe(n->endpoint));
  return out;
}

}  // namespace redlimit

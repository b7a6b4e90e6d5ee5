// ClusterConnection::pipeline: a batch split by master, every master's share in flight at once.
#include <algorithm>
#include <optional>

#include "redlimit/errors.hpp"
#include "redlimit/transport/cluster_connection.hpp"

namespace redlimit {

namespace {

std::vector<std::vector<std::string>> commands_at(const std::vector<std::vector<std::string>>& commands,
                                                  const std::vector<std::size_t>& indices) {
  std::vector<std::vector<std::string>> batch;
  batch.reserve(indices.size());
  for (std::size_t i : indices) batch.push_back(commands[i]);
  return batch;
}

}  // namespace

std::vector<Reply> ClusterConnection::pipeline(const std::vector<std::vector<std::string>>& commands) {
  // Split by master, answers back in the caller's order. A redirected command is resent on its own
  // through command(), within the same call's deadline. A master failing in transit fails its own
  // commands only (transit_failure replies): the others' answers stand, as they were recorded.
  // Only when every command failed does the call fail as a whole.
  CallScope call(*this);
  std::vector<Reply> out(commands.size());
  std::exception_ptr failure;
  std::vector<Group> groups = group_by_master(commands, out, failure);
  if (groups.size() == 1) {
    send_group(groups.front(), commands, out, failure);  // may share a round trip with other calls
  } else if (!groups.empty()) {
    send_at_once(groups, commands, out, failure);
  }
  if (failure && std::all_of(out.begin(), out.end(), is_transit_failure)) std::rethrow_exception(failure);
  return out;
}

std::vector<ClusterConnection::Group> ClusterConnection::group_by_master(
    const std::vector<std::vector<std::string>>& commands, std::vector<Reply>& out, std::exception_ptr& failure) {
  std::vector<Group> groups;
  std::vector<std::size_t> everywhere;  // FUNCTION LOAD: ahead of each master's share
  const auto group_of = [&](const std::shared_ptr<Node>& n) {
    auto it = std::find_if(groups.begin(), groups.end(), [&](const Group& g) { return g.node == n; });
    return it != groups.end() ? it : groups.insert(groups.end(), Group{n, {}});
  };
  for (std::size_t i = 0; i < commands.size(); ++i) {
    if (to_every_master(commands[i])) {
      everywhere.push_back(i);
      continue;
    }
    const int slot = command_slot(commands[i]);
    std::shared_ptr<Node> node;
    try {
      node = slot < 0 ? every_master().front() : route_fresh(static_cast<std::uint16_t>(slot));
    } catch (const ConnectionError& e) {  // no master serves its slot (or none answered): it alone fails
      fail_group(Group{nullptr, {i}}, commands, e, out, failure);
      continue;
    }
    group_of(node)->indices.push_back(i);
  }
  if (everywhere.empty()) return groups;
  for (const auto& n : every_master()) {
    auto& indices = group_of(n)->indices;
    indices.insert(indices.begin(), everywhere.begin(), everywhere.end());
  }
  return groups;
}

// Every master the map names. Only an empty map is read first: a map that lacks some slots (no
// master serves them, cluster-require-full-coverage no) still names the masters of the others.
std::vector<std::shared_ptr<ClusterConnection::Node>> ClusterConnection::every_master() {
  auto masters = named_masters();
  if (!masters.empty()) return masters;
  refresh();  // ConnectionError when no node answers
  masters = named_masters();
  if (masters.empty()) throw ConnectionError("the cluster's slot map names no master");
  return masters;
}

void ClusterConnection::send_group(const Group& g, const std::vector<std::vector<std::string>>& commands,
                                   std::vector<Reply>& out, std::exception_ptr& failure) {
  std::vector<Reply> replies;
  try {
    replies = g.node->pool->pipeline(commands_at(commands, g.indices));
  } catch (const ConnectionError& e) {
    // The outcome of this master's commands is unknown: none is replayed. Learn the new topology
    // for the next call.
    fail_group(g, commands, e, out, failure);
    refresh_quietly(g.node);
    return;
  }
  deliver(g, replies, commands, out, failure);
}

// Every master's share is written before any reply is read, so the masters run their parts side by
// side and a batch waits for its slowest master once, instead of for each master in turn (and a
// stalled master no longer holds back the sending of the others' shares). Each share takes a
// connection of its master's pool for itself, in the masters' order (their shard numbers), the same
// order in every thread: two batches each holding a connection the other waits for cannot happen.
// Redirects and refreshes wait until every connection is back in its pool, as they take connections
// of their own.
void ClusterConnection::send_at_once(std::vector<Group>& groups, const std::vector<std::vector<std::string>>& commands,
                                     std::vector<Reply>& out, std::exception_ptr& failure) {
  std::sort(groups.begin(), groups.end(), [](const Group& a, const Group& b) { return a.node->shard < b.node->shard; });
  std::vector<std::optional<ConnectionPool::Sent>> sent(groups.size());
  std::vector<std::vector<Reply>> replies(groups.size());  // each share's, as far as they were read
  for (std::size_t i = 0; i < groups.size(); ++i) {
    try {
      sent[i].emplace(groups[i].node->pool->send_only(commands_at(commands, groups[i].indices)));
    } catch (const ConnectionError& e) {
      fail_group(groups[i], commands, e, out, failure);
    }
  }
  for (std::size_t i = 0; i < groups.size(); ++i) {
    if (!sent[i]) continue;
    try {
      sent[i]->receive(replies[i]);
    } catch (const ConnectionError& e) {
      // The replies read before the failure stand (deliver, below); the rest's outcome is unknown.
      const auto& indices = groups[i].indices;
      Group rest{groups[i].node, {indices.begin() + static_cast<std::ptrdiff_t>(replies[i].size()), indices.end()}};
      fail_group(rest, commands, e, out, failure);
    }
    sent[i].reset();  // the connection back to its pool
  }
  for (std::size_t i = 0; i < groups.size(); ++i) {
    if (replies[i].size() < groups[i].indices.size()) refresh_quietly(groups[i].node);
  }
  for (std::size_t i = 0; i < groups.size(); ++i) {
    deliver(groups[i], replies[i], commands, out, failure);
  }
}

void ClusterConnection::deliver(const Group& g, std::vector<Reply>& replies,
                                const std::vector<std::vector<std::string>>& commands, std::vector<Reply>& out,
                                std::exception_ptr& failure) {
  for (std::size_t j = 0; j < replies.size(); ++j) {
    const std::size_t i = g.indices[j];
    Reply& r = replies[j];
    if (redirected(r) && !to_every_master(commands[i])) {
      try {
        r = command(commands[i]);  // it did not run where it was sent
      } catch (const ConnectionError& e) {
        if (!failure) failure = std::current_exception();
        r = transit_failure(e);
      }
    }
    put(out, i, std::move(r), commands[i]);
  }
}

void ClusterConnection::fail_group(const Group& g, const std::vector<std::vector<std::string>>& commands,
                                   const ConnectionError& e, std::vector<Reply>& out, std::exception_ptr& failure) {
  if (!failure) failure = std::current_exception();  // called in the handler: the error as thrown
  for (std::size_t i : g.indices) put(out, i, transit_failure(e), commands[i]);
}

void ClusterConnection::put(std::vector<Reply>& out, std::size_t i, Reply reply,
                            const std::vector<std::string>& command) {
  // Replies start as nil; no master answers FUNCTION LOAD with nil.
  if (to_every_master(command) && !replaces_every_master_reply(reply, out[i], out[i].type != Reply::Type::nil)) return;
  out[i] = std::move(reply);
}

}  // namespace redlimit

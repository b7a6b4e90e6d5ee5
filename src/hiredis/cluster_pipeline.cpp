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
  std::vector<Group> groups = group_by_master(commands);
  std::exception_ptr failure;
  std::size_t failed = 0;
  if (groups.size() == 1) {
    failed = send_group(groups.front(), commands, out, failure);  // may share a round trip with other calls
  } else if (!groups.empty()) {
    failed = send_at_once(groups, commands, out, failure);
  }
  if (failure && failed == commands.size()) std::rethrow_exception(failure);
  return out;
}

std::vector<ClusterConnection::Group> ClusterConnection::group_by_master(
    const std::vector<std::vector<std::string>>& commands) {
  std::vector<Group> groups;
  for (std::size_t i = 0; i < commands.size(); ++i) {
    const int slot = command_slot(commands[i]);
    const auto n = route_fresh(static_cast<std::uint16_t>(slot < 0 ? 0 : slot));
    auto it = std::find_if(groups.begin(), groups.end(), [&](const Group& g) { return g.node == n; });
    if (it == groups.end()) it = groups.insert(groups.end(), Group{n, {}});
    it->indices.push_back(i);
  }
  return groups;
}

std::size_t ClusterConnection::send_group(const Group& g, const std::vector<std::vector<std::string>>& commands,
                                          std::vector<Reply>& out, std::exception_ptr& failure) {
  std::vector<Reply> replies;
  try {
    replies = g.node->pool->pipeline(commands_at(commands, g.indices));
  } catch (const ConnectionError& e) {
    // The outcome of this master's commands is unknown: none is replayed. Learn the new topology
    // for the next call.
    const std::size_t failed = fail_group(g, e, out, failure);
    refresh_quietly(g.node);
    return failed;
  }
  return deliver(g, replies, commands, out, failure);
}

// Every master's share is written before any reply is read, so the masters run their parts side by
// side and a batch waits for its slowest master once, instead of for each master in turn (and a
// stalled master no longer holds back the sending of the others' shares). Each share takes a
// connection of its master's pool for itself, in the masters' order (their shard numbers), the same
// order in every thread: two batches each holding a connection the other waits for cannot happen.
// Redirects and refreshes wait until every connection is back in its pool, as they take connections
// of their own.
std::size_t ClusterConnection::send_at_once(std::vector<Group>& groups,
                                            const std::vector<std::vector<std::string>>& commands,
                                            std::vector<Reply>& out, std::exception_ptr& failure) {
  std::sort(groups.begin(), groups.end(), [](const Group& a, const Group& b) { return a.node->shard < b.node->shard; });
  std::vector<std::optional<ConnectionPool::Sent>> sent(groups.size());
  std::vector<std::vector<Reply>> replies(groups.size());
  std::vector<bool> answered(groups.size(), false);
  std::size_t failed = 0;
  for (std::size_t i = 0; i < groups.size(); ++i) {
    try {
      sent[i].emplace(groups[i].node->pool->send_only(commands_at(commands, groups[i].indices)));
    } catch (const ConnectionError& e) {
      failed += fail_group(groups[i], e, out, failure);
    }
  }
  for (std::size_t i = 0; i < groups.size(); ++i) {
    if (!sent[i]) continue;
    try {
      replies[i] = sent[i]->receive();
      answered[i] = true;
    } catch (const ConnectionError& e) {
      failed += fail_group(groups[i], e, out, failure);
    }
    sent[i].reset();  // the connection back to its pool
  }
  for (std::size_t i = 0; i < groups.size(); ++i) {
    if (!answered[i]) refresh_quietly(groups[i].node);
  }
  for (std::size_t i = 0; i < groups.size(); ++i) {
    if (answered[i]) failed += deliver(groups[i], replies[i], commands, out, failure);
  }
  return failed;
}

std::size_t ClusterConnection::deliver(const Group& g, std::vector<Reply>& replies,
                                       const std::vector<std::vector<std::string>>& commands, std::vector<Reply>& out,
                                       std::exception_ptr& failure) {
  std::size_t failed = 0;
  for (std::size_t j = 0; j < g.indices.size(); ++j) {
    Reply& r = replies[j];
    if (redirected(r)) {
      try {
        r = command(commands[g.indices[j]]);  // it did not run where it was sent
      } catch (const ConnectionError& e) {
        if (!failure) failure = std::current_exception();
        r = transit_failure(e);
        ++failed;
      }
    }
    out[g.indices[j]] = std::move(r);
  }
  return failed;
}

std::size_t ClusterConnection::fail_group(const Group& g, const ConnectionError& e, std::vector<Reply>& out,
                                          std::exception_ptr& failure) {
  if (!failure) failure = std::current_exception();  // called in the handler: the error as thrown
  for (std::size_t i : g.indices) out[i] = transit_failure(e);
  return g.indices.size();
}

}  // namespace redlimit

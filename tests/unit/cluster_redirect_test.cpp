// ClusterConnection's router against scripted nodes (tests/unit/scripted_node.hpp): what it does
// with a MOVED when a slot map read right after it still names the old owner. That is a real
// cluster mid-reshard: redis-cli gives the slot to its new owner on the two nodes concerned first
// and the other masters learn it from them (by CLUSTER SETSLOT or gossip), so for a moment the old
// owner answers MOVED while a CLUSTER SLOTS elsewhere names the old owner still. The router used
// to read the map after each MOVED and send the command where the map said: back to the old owner,
// MOVED again, until max_redirects() gave the MOVED to the caller as an outage (the failure policy's
// answer for a healthy cluster: seen once in CI, tests/cluster/load_test.cpp's resharding test).
// The MOVED names the node to send to; the map read after it is for the other slots.
#include <gtest/gtest.h>

#include <string>

#include "redlimit/detail/keys.hpp"
#include "redlimit/transport/cluster_connection.hpp"
#include "unit/scripted_node.hpp"

namespace {

using redlimit_test::ScriptedNode;

TEST(ClusterRedirect, AMovedIsFollowedEvenWhenTheMapReadAfterItIsStale) {
  const std::string key = "k";
  const int slot = redlimit::detail::key_slot(key);
  int new_owner_port = 0, old_owner_port = 0;
  // Every node's CLUSTER SLOTS names the old owner; the old owner answers MOVED to the new one.
  ScriptedNode new_owner([&](const std::vector<std::string>& argv) {
    if (argv[0] == "CLUSTER") return ScriptedNode::every_slot_on(old_owner_port);
    if (argv[0] == "GET") return ScriptedNode::bulk("from the new owner");
    return std::string("+OK\r\n");
  });
  new_owner_port = new_owner.port();
  ScriptedNode old_owner([&](const std::vector<std::string>& argv) {
    if (argv[0] == "CLUSTER") return ScriptedNode::every_slot_on(old_owner_port);
    if (argv[0] == "GET") {
      return ScriptedNode::error("MOVED " + std::to_string(slot) + " 127.0.0.1:" + std::to_string(new_owner_port));
    }
    return std::string("+OK\r\n");
  });
  old_owner_port = old_owner.port();

  redlimit::Options options;
  options.command_timeout = std::chrono::milliseconds(2000);
  redlimit::ClusterConnection cluster(
      redlimit::parse_cluster_url("redis-cluster://127.0.0.1:" + std::to_string(old_owner_port)), options);
  ASSERT_EQ(cluster.node_for_slot(static_cast<std::uint16_t>(slot)), "127.0.0.1:" + std::to_string(old_owner_port));

  const redlimit::Reply reply = cluster.command({"GET", key});
  EXPECT_FALSE(reply.is_error()) << reply.str;
  EXPECT_EQ(reply.str, "from the new owner");
  EXPECT_EQ(old_owner.count("GET"), 1);  // one MOVED, not max_redirects() + 1 of them
  EXPECT_EQ(new_owner.count("GET"), 1);
  // The map read after the MOVED (stale) did not undo what the MOVED said about this slot.
  EXPECT_EQ(cluster.node_for_slot(static_cast<std::uint16_t>(slot)), "127.0.0.1:" + std::to_string(new_owner_port));
  EXPECT_GE(old_owner.count("CLUSTER"), 2);  // the map was read again, for the other slots

  const redlimit::Reply again = cluster.command({"GET", key});
  EXPECT_EQ(again.str, "from the new owner");
  EXPECT_EQ(old_owner.count("GET"), 1);  // the next call goes to the new owner directly
  EXPECT_EQ(new_owner.count("GET"), 2);
}

}  // namespace

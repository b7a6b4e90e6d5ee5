// TLS on a Redis Cluster (issue 15): rediss-cluster:// against three redis-server masters this binary
// starts with --port 0 --tls-port (nothing in clear on TCP), --tls-cluster yes (the bus and the
// ports the nodes announce are TLS ones) and --tls-auth-clients yes (mutual TLS). The URL names one
// seed only, so the two other masters are reached through CLUSTER SLOTS alone: their connections
// must get the seed's CA and client certificate, and their certificates are verified against the
// host the slot map names (127.0.0.1, an IP entry of the test certificate).
//
// The harness sets the cluster up itself over each node's unix socket (RedisServer::command): slots
// with CLUSTER ADDSLOTSRANGE, the nodes joined with CLUSTER MEET (with the bus port: it is not
// port + 10000 here), then it waits (20 s at most) for cluster_state:ok on every node.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "redlimit/redlimit.hpp"
#include "support/redis_server.hpp"
#include "tls/certificates.hpp"

namespace {

using namespace std::chrono_literals;
using redlimit::Limit;
using redlimit_test::Certificates;
using redlimit_test::tls_error;
using redlimit_test::RedisServer;

constexpr int kNodes = 3;

class TlsClusterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    try {
      certs_ = new Certificates();
      const auto start = std::chrono::steady_clock::now();
      start_nodes();
      const auto started = std::chrono::steady_clock::now();
      join_nodes();
      const auto ms = [](auto d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); };
      std::printf("[ figures  ] TLS cluster: 3 masters started in %lld ms, cluster_state:ok %lld ms later\n",
                  static_cast<long long>(ms(started - start)),
                  static_cast<long long>(ms(std::chrono::steady_clock::now() - started)));
    } catch (const std::exception& e) {
      setup_error_ = e.what();
    }
  }
  static void TearDownTestSuite() {
    for (auto*& n : nodes_) {
      delete n;  // stops it (by its pid) and removes its directory
      n = nullptr;
    }
    delete certs_;
    certs_ = nullptr;
  }
  void SetUp() override {
    if (!setup_error_.empty()) FAIL() << "the TLS cluster did not start: " << setup_error_;
  }

  static void start_nodes() {
    const Certificates& c = *certs_;
    for (auto*& n : nodes_) {
      n = new RedisServer(RedisServer::ClusterNode{},
                          {"--tls-cert-file", c("server.crt"), "--tls-key-file", c("server.key"),
                           "--tls-client-cert-file", c("client.crt"), "--tls-client-key-file", c("client.key"),
                           "--tls-ca-cert-file", c("ca.crt"), "--tls-auth-clients", "yes", "--tls-cluster", "yes",
                           "--tls-replication", "yes", "--cluster-node-timeout", "5000"});
    }
  }

  // Each master a third of the slots, all of them met by the first, then cluster_state:ok everywhere.
  static void join_nodes() {
    for (int i = 0; i < kNodes; ++i) {
      const int lo = i * 16384 / kNodes, hi = (i + 1) * 16384 / kNodes - 1;
      expect_ok(*nodes_[i], {"CLUSTER", "ADDSLOTSRANGE", std::to_string(lo), std::to_string(hi)});
    }
    for (int i = 1; i < kNodes; ++i) {
      expect_ok(*nodes_[0], {"CLUSTER", "MEET", "127.0.0.1", std::to_string(nodes_[i]->port()),
                             std::to_string(nodes_[i]->bus_port())});
    }
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    std::string last;
    while (std::chrono::steady_clock::now() < deadline) {
      bool ok = true;
      for (auto* n : nodes_) {
        last = n->command({"CLUSTER", "INFO"}).str;
        ok = ok && last.find("cluster_state:ok") != std::string::npos &&
             last.find("cluster_known_nodes:3") != std::string::npos;
      }
      if (ok) return;
      std::this_thread::sleep_for(50ms);
    }
    throw std::runtime_error("no cluster_state:ok on every node within 20 s; last CLUSTER INFO:\n" + last);
  }

  static void expect_ok(RedisServer& n, const std::vector<std::string>& argv) {
    const redlimit::Reply r = n.command(argv);
    if (r.is_error() || r.str != "OK") throw std::runtime_error(argv[0] + " " + argv[1] + ": " + r.str);
  }

  // rediss-cluster://127.0.0.1:SEED?QUERY: the first node only.
  static std::string url(const std::string& query) {
    return "rediss-cluster://127.0.0.1:" + std::to_string(nodes_[0]->port()) + "?" + query;
  }
  static std::string mutual() {
    const Certificates& c = *certs_;
    return "tls_ca_file=" + c("ca.crt") + "&tls_cert_file=" + c("client.crt") + "&tls_key_file=" + c("client.key");
  }

  // Every key on every node, with its node; each must have a TTL (PTTL > 0).
  static std::map<std::string, int> keys_with_ttl() {
    std::map<std::string, int> where;
    for (int i = 0; i < kNodes; ++i) {
      for (const auto& k : nodes_[i]->keys()) {
        where[k] = i;
        EXPECT_GT(nodes_[i]->integer({"PTTL", k}), 0) << "no TTL on " << k << " (node " << i << ")";
      }
    }
    return where;
  }

  static Certificates* certs_;
  static RedisServer* nodes_[kNodes];
  static std::string setup_error_;
};

Certificates* TlsClusterTest::certs_ = nullptr;
RedisServer* TlsClusterTest::nodes_[kNodes] = {};
std::string TlsClusterTest::setup_error_;

// 4 threads over the pools of all three masters: a fixed window of 10 admits exactly 10 of each
// subject's 16 requests, and the subjects' keys are on every master, each with a TTL.
TEST_F(TlsClusterTest, SubjectsOnEveryMasterAreDecidedExactly) {
  auto limiter = redlimit::RateLimiter::connect(url(mutual()));
  auto fw = limiter.fixed_window("tls-cluster", Limit::per_minute(10));
  constexpr int kSubjects = 24, kThreads = 4, kEach = 4;
  std::vector<std::atomic<int>> admitted(kSubjects);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int s = 0; s < kSubjects; ++s) {
        for (int i = 0; i < kEach; ++i) admitted[s] += fw.consume("subject-" + std::to_string(s)).allowed ? 1 : 0;
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int s = 0; s < kSubjects; ++s) EXPECT_EQ(admitted[s].load(), 10) << "subject-" << s;
  int per_node[kNodes] = {};
  for (const auto& [key, node] : keys_with_ttl()) {
    if (key.find("tls-cluster") != std::string::npos) ++per_node[node];
  }
  for (int i = 0; i < kNodes; ++i) EXPECT_GT(per_node[i], 0) << "no subject's key on node " << i;
}

// One batch whose requests hash to every master: split by node, one pipeline each, every decision
// exact (a cost of 3 under a limit of 5: the first of each subject admitted, the second refused).
TEST_F(TlsClusterTest, ConsumeManyAcrossSlotsIsDecidedOnEveryMaster) {
  auto limiter = redlimit::RateLimiter::connect(url(mutual()));
  auto fw = limiter.fixed_window("tls-batch", Limit::per_minute(5));
  std::vector<std::string> subjects;
  for (int s = 0; s < 30; ++s) subjects.push_back("batch-" + std::to_string(s));
  std::vector<redlimit::Request> batch;
  for (const auto& s : subjects) batch.push_back({s, 3});
  for (const auto& s : subjects) batch.push_back({s, 3});
  const auto decisions = fw.consume_many(batch);
  ASSERT_EQ(decisions.size(), batch.size());
  for (std::size_t i = 0; i < decisions.size(); ++i) {
    EXPECT_EQ(decisions[i].allowed, i < subjects.size()) << batch[i].subject << " #" << i;
    EXPECT_EQ(decisions[i].source, redlimit::Source::primary) << batch[i].subject;
  }
  int per_node[kNodes] = {};
  for (const auto& [key, node] : keys_with_ttl()) {
    if (key.find("tls-batch") != std::string::npos) ++per_node[node];
  }
  for (int i = 0; i < kNodes; ++i) EXPECT_GT(per_node[i], 0) << "no batch key on node " << i;
}

// A CA that signed none of the nodes' certificates, and a name none of them holds: TlsError, with
// the reason, whatever the failure policy (configuration, not an outage).
TEST_F(TlsClusterTest, VerificationFailuresAreTlsErrorsWhateverThePolicy) {
  const Certificates& c = *certs_;
  const std::string other_ca =
      "tls_ca_file=" + c("other-ca.crt") + "&tls_cert_file=" + c("client.crt") + "&tls_key_file=" + c("client.key");
  for (const auto policy : {redlimit::OnFailure::raise, redlimit::OnFailure::fail_open}) {
    std::string what = tls_error(url(other_ca), policy);
    EXPECT_NE(what.find("the server's certificate was refused"), std::string::npos) << what;
    EXPECT_NE(what.find("127.0.0.1:" + std::to_string(nodes_[0]->port())), std::string::npos) << what;
    what = tls_error(url(mutual() + "&tls_server_name=redis.example.com"), policy);
    EXPECT_NE(what.find("hostname mismatch (verified against redis.example.com)"), std::string::npos) << what;
  }
}

// Without a client certificate the nodes (tls-auth-clients yes) drop us: a ConnectionError naming
// the certificate, not a silent start.
TEST_F(TlsClusterTest, MutualTlsWithoutAClientCertificateIsRefusedClearly) {
  try {
    redlimit::RateLimiter::connect(url("tls_ca_file=" + (*certs_)("ca.crt")));
    FAIL() << "connected without a client certificate";
  } catch (const redlimit::ConnectionError& e) {
    EXPECT_NE(std::string(e.what()).find("certificate"), std::string::npos) << e.what();
  }
}

}  // namespace

// The cluster under load: resharding (slots moved with redis-cli --cluster reshard while threads
// decide), a throughput figure against one server, and failover (a master killed with SIGKILL while
// 8 threads decide). Failover kills a node, so it is the last suite of the last file.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cluster/cluster_fixture.hpp"
#include "redlimit/detail/keys.hpp"
#include "support/redis_server.hpp"

namespace redlimit_cluster {
namespace {

using namespace std::chrono_literals;
using redlimit::Decision;
using redlimit::Limit;
using SteadyClock = std::chrono::steady_clock;

double seconds_since(SteadyClock::time_point t) {
  return std::chrono::duration<double>(SteadyClock::now() - t).count();
}

// Collects unexpected exception messages from worker threads (a few of each kind).
struct Errors {
  std::mutex mutex;
  std::map<std::string, std::int64_t> count;  // kind -> n
  std::vector<std::string> samples;
  void add(const std::string& kind, const std::string& what) {
    std::lock_guard<std::mutex> lock(mutex);
    if (++count[kind] <= 3) samples.push_back(kind + ": " + what);
  }
  std::int64_t of(const std::string& kind) {
    std::lock_guard<std::mutex> lock(mutex);
    return count[kind];
  }
  std::string report() {
    std::lock_guard<std::mutex> lock(mutex);
    std::string out;
    for (const auto& [k, n] : count) out += k + "=" + std::to_string(n) + " ";
    for (const auto& s : samples) out += "\n  " + s;
    return out;
  }
};

// `calls=` of INFO commandstats for one command on one node.
std::int64_t command_calls(int port, const std::string& command) {
  const redlimit::Reply info = raw(port, {"INFO", "commandstats"});
  const std::string needle = "cmdstat_" + command + ":calls=";
  const auto pos = info.str.find(needle);
  return pos == std::string::npos ? 0 : std::stoll(info.str.substr(pos + needle.size()));
}

// ---------------------------------------------------------------------------------------------
// Resharding under load.

class ClusterResharding : public ClusterTest {};

// Long on purpose: one resharding told in order (load, slots moving, the exact count at the end).
TEST_F(ClusterResharding, DecisionsStayExactWhileSlotsMove) {
  at(0s);  // fixed: the window never rolls
  constexpr std::int64_t L = 1500;  // still admitting while the slots move
  auto fw = rl().fixed_window("reshard", Limit(L, 1h));
  const auto masters = live_masters();
  ASSERT_EQ(masters.size(), 3u);
  const NodeInfo& from = masters[0];
  const NodeInfo& to = masters[1];
  ASSERT_FALSE(from.slots.empty());
  // redis-cli takes the source's lowest slots first: subjects in the first 100 of them move.
  std::vector<int> from_slots;
  for (auto [lo, hi] : from.slots) {
    for (int s = lo; s <= hi && from_slots.size() < 100; ++s) from_slots.push_back(s);
  }
  const std::set<int> moving(from_slots.begin(), from_slots.end());
  std::vector<std::string> subjects;
  std::vector<int> subject_slot;
  for (int i = 0; i < 200000 && subjects.size() < 40; ++i) {
    const std::string who = "r-" + std::to_string(i);
    const int slot = redlimit::detail::key_slot(fw.key_for(who));
    if (moving.count(slot)) {
      subjects.push_back(who);
      subject_slot.push_back(slot);
    }
  }
  for (int i = 0; subjects.size() < 48; ++i) {  // a few that stay put, on any master
    const std::string who = "stay-" + std::to_string(i);
    const int slot = redlimit::detail::key_slot(fw.key_for(who));
    if (!moving.count(slot)) {
      subjects.push_back(who);
      subject_slot.push_back(slot);
    }
  }
  ASSERT_GE(subjects.size(), 48u);
  const std::string to_name = "127.0.0.1:" + std::to_string(to.port);
  // Give every moving slot that holds a subject some keys before the move.
  for (std::size_t i = 0; i < subjects.size(); ++i) ASSERT_TRUE(fw.consume(subjects[i]).allowed);

  std::vector<std::atomic<std::int64_t>> admitted(subjects.size());
  for (auto& a : admitted) a = 1;
  std::atomic<std::int64_t> decisions{0};
  std::atomic<bool> stop{false};
  Errors errors;
  std::vector<std::thread> threads;
  const auto start = SteadyClock::now();
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (std::size_t i = t; !stop.load(); i += 7) {
        const std::size_t k = i % subjects.size();
        try {
          const Decision d = fw.consume(subjects[k]);
          ++decisions;
          if (d.allowed) ++admitted[k];
        } catch (const redlimit::UnavailableError& e) {
          errors.add("UnavailableError", e.what());
        } catch (const redlimit::ReplyError& e) {
          errors.add("ReplyError", e.what());
        } catch (const redlimit::TimeoutError& e) {
          errors.add("TimeoutError", e.what());
        } catch (const redlimit::ConnectionError& e) {
          errors.add("ConnectionError", e.what());
        } catch (const std::exception& e) {
          errors.add("other", e.what());
        }
      }
    });
  }
  std::this_thread::sleep_for(500ms);
  const std::int64_t asking_before = command_calls(to.port, "asking");
  std::string out;
  const int rc = run("redis-cli --cluster reshard 127.0.0.1:" + std::to_string(from.port) + " --cluster-from " +
                         from.id + " --cluster-to " + to.id + " --cluster-slots 100 --cluster-yes",
                     120, &out);
  const double reshard_seconds = seconds_since(start) - 0.5;
  // Keep deciding a little after the move (MOVED for the moved slots), at least ~3 s in all.
  while (seconds_since(start) < 3.0) std::this_thread::sleep_for(50ms);
  std::this_thread::sleep_for(500ms);
  stop = true;
  for (auto& th : threads) th.join();
  ASSERT_EQ(rc, 0) << "redis-cli --cluster reshard failed:\n" << out;

  std::cout << "[ reshard ] 100 slots " << from.port << " -> " << to.port << " in " << reshard_seconds << " s; "
            << decisions.load() << " decisions over " << seconds_since(start) << " s; errors: " << errors.report()
            << "\n";
  EXPECT_EQ(errors.of("ReplyError"), 0) << errors.report();  // CROSSSLOT, MOVED/ASK leaking out...
  EXPECT_EQ(errors.of("other"), 0) << errors.report();
  EXPECT_EQ(errors.of("UnavailableError"), 0) << "TRYAGAIN not absorbed by the backoff: " << errors.report();
  EXPECT_EQ(errors.of("ConnectionError") + errors.of("TimeoutError"), 0) << errors.report();
  EXPECT_GT(decisions.load(), 0);

  // No wrong decision: admitted never exceeds L, and what Redis holds is exactly what was admitted
  // (no write lost or doubled by the move) when no call had an unknown outcome.
  const bool exact = errors.of("ConnectionError") + errors.of("TimeoutError") == 0;
  std::int64_t max_admitted = 0;
  for (std::size_t k = 0; k < subjects.size(); ++k) {
    EXPECT_LE(admitted[k].load(), L) << subjects[k];
    max_admitted = std::max(max_admitted, admitted[k].load());
    const Decision p = fw.peek(subjects[k]);
    if (exact) EXPECT_EQ(p.remaining, L - admitted[k].load()) << subjects[k] << ": " << p;
  }
  std::cout << "[ reshard ] ASKING calls on the target during the move: "
            << command_calls(to.port, "asking") - asking_before << "\n";
  std::cout << "[ reshard ] max admitted per subject " << max_admitted << " (limit " << L << ")\n";

  // The map followed the move (MOVED refreshed it), and Redis agrees on the new owner.
  for (std::size_t k = 0; k < subjects.size(); ++k) {
    if (!moving.count(subject_slot[k])) continue;
    EXPECT_EQ(wait_owner(subject_slot[k], to.port), to.port) << "slot " << subject_slot[k];
    EXPECT_EQ(connection->node_for_slot(static_cast<std::uint16_t>(subject_slot[k])), to_name)
        << "slot " << subject_slot[k];
  }
}

// ---------------------------------------------------------------------------------------------
// Throughput: the same fixed-window load on the cluster and on one server (a figure, no assertion
// on speed).

double decisions_per_second(const redlimit::RateLimiter& limiter, const char* what) {
  auto fw = limiter.fixed_window("throughput", Limit(1'000'000'000, 1h));
  std::atomic<std::int64_t> n{0};
  std::atomic<std::int64_t> failures{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  const auto start = SteadyClock::now();
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::int64_t i = t;
      while (!stop.load()) {
        try {
          fw.consume("tp-" + std::to_string(i % 1000));
          ++n;
        } catch (const std::exception&) {
          ++failures;
        }
        i += 4;
      }
    });
  }
  std::this_thread::sleep_for(2s);
  stop = true;
  for (auto& th : threads) th.join();
  const double rate = static_cast<double>(n.load()) / seconds_since(start);
  std::cout << "[ throughput ] " << what << ": " << static_cast<std::int64_t>(rate) << " decisions/s (4 threads, "
            << n.load() << " in ~2 s, " << failures.load() << " failures)\n";
  EXPECT_EQ(failures.load(), 0) << what;
  return rate;
}

class ClusterThroughput : public ClusterTest {};

TEST_F(ClusterThroughput, FixedWindowClusterVsOneServer) {
  at(0s);
  const double cluster_rate = decisions_per_second(rl(), "3-master cluster");
  redlimit_test::RedisServer single;
  const auto one = redlimit::RateLimiter::connect(single.url(), options());
  const double single_rate = decisions_per_second(one, "one server");
  ASSERT_GT(single_rate, 0);
  std::cout << "[ throughput ] cluster / one server = " << cluster_rate / single_rate << "\n";
  EXPECT_GT(cluster_rate, 0);
}

// ---------------------------------------------------------------------------------------------
// Failover under load: last, as it kills a master.

class ClusterZFailover : public ClusterTest {
 protected:
  redlimit::Options options() const override {
    redlimit::Options o = ClusterTest::options();
    o.on_failure = redlimit::OnFailure::fail_closed;
    o.command_timeout = 300ms;
    o.connect_timeout = 300ms;
    o.breaker_threshold = 0;
    o.pool.size = 8;
    o.pool.wait_timeout = 2000ms;
    return o;
  }
};

// Long on purpose: one failover told in order (load, kill, promotion, recovery, the bound), so that a
// failure reads as the step it happened at.
TEST_F(ClusterZFailover, KilledMasterDecisionsResumeWithinBound) {
  at(0s);  // fixed: the window never rolls
  // Large enough that the subjects are still being admitted when the master dies.
  constexpr std::int64_t L = 1000;
  constexpr int kSubjects = 50;
  auto fw = rl().fixed_window("failover", Limit(L, 1h));
  const auto masters = live_masters();
  ASSERT_EQ(masters.size(), 3u);
  std::vector<std::string> subjects;
  std::vector<int> owner;
  for (int i = 0; i < kSubjects; ++i) {
    subjects.push_back("f-" + std::to_string(i));
    owner.push_back(owner_port(redlimit::detail::key_slot(fw.key_for(subjects.back()))));
  }
  // The victim: the master serving the most of our subjects.
  std::map<int, int> per_master;
  for (int p : owner) ++per_master[p];
  const int victim = std::max_element(per_master.begin(), per_master.end(), [](auto& a, auto& b) {
                       return a.second < b.second;
                     })->first;
  const auto& ports = cluster().ports;
  const auto it = std::find(ports.begin(), ports.end(), victim);
  ASSERT_NE(it, ports.end());
  const pid_t victim_pid = cluster().pids[static_cast<std::size_t>(it - ports.begin())];
  std::cout << "[ failover ] victim master 127.0.0.1:" << victim << " (pid " << victim_pid << "), serving "
            << per_master[victim] << " of " << kSubjects << " subjects\n";

  std::vector<std::atomic<std::int64_t>> admitted(subjects.size());
  for (auto& a : admitted) a = 0;
  std::atomic<std::int64_t> decisions{0}, by_policy{0}, primary_after_kill{0};
  std::atomic<bool> stop{false}, killed{false};
  std::atomic<std::int64_t> resume_us{-1};  // first primary decision on the victim's slots after the kill
  std::atomic<int> finished{0};
  std::atomic<std::int64_t> gap_start_ns{-1};  // steady time of the first failure on the victim's slots
  SteadyClock::time_point kill_time{};  // written before `killed` is set, read after
  Errors errors;
  std::vector<std::thread> threads;
  const auto start = SteadyClock::now();
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (std::size_t i = t; !stop.load(); i += 3) {
        const std::size_t k = i % subjects.size();
        const auto call_start = SteadyClock::now();
        try {
          const Decision d = fw.consume(subjects[k]);
          ++decisions;
          const bool on_victim = owner[k] == victim;
          if (d.source == redlimit::Source::primary) {
            if (d.allowed) ++admitted[k];
            // Resumed: a primary decision on the victim's slots, from a call that started after a
            // failure there was seen (so it cannot be a reply the dead master sent before dying).
            const std::int64_t gap = gap_start_ns.load();
            if (on_victim && gap >= 0 && call_start.time_since_epoch().count() > gap) {
              const auto us = std::chrono::duration_cast<std::chrono::microseconds>(SteadyClock::now() - kill_time).count();
              std::int64_t expected = -1;
              resume_us.compare_exchange_strong(expected, us);
              ++primary_after_kill;
            }
          } else if (d.source == redlimit::Source::failure_policy) {
            ++by_policy;
            EXPECT_FALSE(d.allowed) << "fail_closed admitted: " << d;
            if (on_victim && killed.load()) {
              std::int64_t expected = -1;
              gap_start_ns.compare_exchange_strong(expected, SteadyClock::now().time_since_epoch().count());
            }
          } else {
            errors.add("unexpected source", std::to_string(static_cast<int>(d.source)));
          }
        } catch (const std::exception& e) {
          errors.add("exception", e.what());  // fail_closed answers every documented failure
        }
      }
      ++finished;
    });
  }
  std::this_thread::sleep_for(1s);
  const std::int64_t decisions_before = decisions.load();
  kill_time = SteadyClock::now();
  ASSERT_EQ(::kill(victim_pid, SIGKILL), 0);
  killed = true;
  // Run ~6 s in all; longer (to 15 s after the kill) while the victim's slots have not resumed.
  while (seconds_since(start) < 6.0 || (resume_us.load() < 0 && seconds_since(kill_time) < 15.0)) {
    std::this_thread::sleep_for(50ms);
  }
  stop = true;
  const auto join_start = SteadyClock::now();
  while (finished.load() < 8 && seconds_since(join_start) < 30.0) std::this_thread::sleep_for(20ms);
  if (finished.load() < 8) {
    std::cerr << "[ failover ] worker threads hung for 30 s after stop: aborting\n";
    stop_cluster_now();  // atexit handlers do not run on abort
    std::abort();
  }
  for (auto& th : threads) th.join();

  const redlimit::Counters c = rl().counters();
  const double resume_s = resume_us.load() < 0 ? -1 : static_cast<double>(resume_us.load()) / 1e6;
  std::int64_t max_victim = 0, max_survivor = 0;
  for (std::size_t k = 0; k < subjects.size(); ++k) {
    (owner[k] == victim ? max_victim : max_survivor) =
        std::max(owner[k] == victim ? max_victim : max_survivor, admitted[k].load());
  }
  std::cout << "[ failover ] decisions: " << decisions_before << " before the kill, " << decisions.load()
            << " in all over " << seconds_since(start) << " s; answered by fail_closed " << by_policy.load()
            << "; counters: errors " << c.errors << ", from_failure_policy " << c.from_failure_policy << "\n"
            << "[ failover ] first failure on the killed master's slots "
            << (gap_start_ns.load() < 0 ? -1.0 : (gap_start_ns.load() - kill_time.time_since_epoch().count()) / 1e9)
            << " s after the kill\n"
            << "[ failover ] resumed on the killed master's slots " << resume_s
            << " s after the kill (cluster-node-timeout 1 s); primary decisions there after: "
            << primary_after_kill.load() << "\n"
            << "[ failover ] max admitted per subject: " << max_victim << " on the killed master's slots, "
            << max_survivor << " on the others (limit " << L << ", bound " << 2 * L << " / " << L << ")\n"
            << "[ failover ] unexpected: " << errors.report() << "\n";

  EXPECT_EQ(errors.count.size(), 0u) << errors.report();
  ASSERT_GE(resume_us.load(), 0) << "no primary decision on the killed master's slots within 15 s";
  EXPECT_LE(resume_s, 10.0);
  EXPECT_TRUE(c.from_failure_policy > 0 || c.errors > 0) << "the gap should have been answered by the policy";
  EXPECT_GT(by_policy.load(), 0);
  for (std::size_t k = 0; k < subjects.size(); ++k) {
    if (owner[k] == victim) {
      EXPECT_LE(admitted[k].load(), 2 * L) << subjects[k] << " (killed master)";
    } else {
      EXPECT_LE(admitted[k].load(), L) << subjects[k];
    }
  }
  // The client's map now points the victim's slots at a live master.
  const std::string dead = "127.0.0.1:" + std::to_string(victim);
  for (std::size_t k = 0; k < subjects.size(); ++k) {
    EXPECT_NE(connection->node_for_slot(redlimit::detail::key_slot(fw.key_for(subjects[k]))), dead) << subjects[k];
  }
}

}  // namespace
}  // namespace redlimit_cluster

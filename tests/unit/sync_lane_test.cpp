// Options::share_script_calls for consume() from many threads (detail/sync_lane.hpp), against a
// connection that holds each script call until the test lets it through: with
// Options::shared_call_flights at 2, a call made while two are on their way waits, and the calls
// queued meanwhile go as one script call, in the order they came, at the time they are sent, under
// the deadline of the oldest; each caller gets its own decision.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "sync_lane_fixture.hpp"

namespace {

using redlimit::Decision;
using sync_lane_fixture::SyncLaneTest;

TEST_F(SyncLaneTest, CallsMadeWhileTwoAreOnTheirWayGoTogetherInOrderAtTheTimeTheyAreSent) {
  make(true);
  Decision a, b, c, d, e;
  std::thread ta = start("u1", a);
  gate->wait_for_commands(1);  // u1 alone, held
  std::thread tb = start("u2", b);
  gate->wait_for_commands(2);  // u2 alone too: two calls may be on their way at once
  const auto queued_from = std::chrono::steady_clock::now();
  std::thread tc = start("u3", c);
  const auto after_u3 = std::chrono::steady_clock::now();
  std::thread td = start("u4", d);
  std::thread te = start("u5", e);
  clock->at += 5'000'000;                    // five seconds pass before the shared call goes
  for (int i = 0; i < 3; ++i) gate->pass();  // u1 and u2 come back; u3..u5 go as one call
  for (auto* t : {&ta, &tb, &tc, &td, &te}) t->join();

  ASSERT_EQ(gate->commands.size(), 3u);
  EXPECT_EQ(gate->commands[0][2], "1");  // one request: its state (a fixed window's holds its block)
  EXPECT_EQ(gate->commands[1][2], "1");
  const auto& shared = gate->commands[2];
  ASSERT_EQ(shared[2], "3");
  EXPECT_EQ(shared[3], "redlimit:{gate|u3}:fw");
  EXPECT_EQ(shared[4], "redlimit:{gate|u4}:fw");
  EXPECT_EQ(shared[5], "redlimit:{gate|u5}:fw");
  // ARGV[1]: the time the shared call was sent, not its callers' own readings five seconds before.
  EXPECT_EQ(shared[6], std::to_string(clock->at.load()));
  EXPECT_EQ(gate->commands[0][4], std::to_string(clock->at.load() - 5'000'000));
  // Each caller its own decision.
  EXPECT_EQ(a.remaining, 1);
  EXPECT_EQ(b.remaining, 2);
  EXPECT_EQ(c.remaining, 3);
  EXPECT_EQ(d.remaining, 4);
  EXPECT_EQ(e.remaining, 5);
  // The shared call's deadline counts from its oldest caller's start (u3's), before u4's and u5's.
  ASSERT_EQ(gate->starts.size(), 3u);
  EXPECT_TRUE(gate->starts[2] >= queued_from);
  EXPECT_TRUE(gate->starts[2] < after_u3);
}

// A sliding window of 10,000 buckets: a script call carries one of its requests
// (DecisionPath::per_call_of), so the calls queued behind the two on their way take a flight each,
// each a call of its own (a transport call, begin_call, each), not one flight of three calls.
TEST_F(SyncLaneTest, CallsOfManyBucketsTakeAFlightEach) {
  make(true, 10'000);
  Decision d[5];
  std::vector<std::thread> threads;
  threads.push_back(start("u1", d[0]));
  gate->wait_for_commands(1);
  threads.push_back(start("u2", d[1]));
  gate->wait_for_commands(2);
  for (int i = 2; i < 5; ++i) threads.push_back(start("u" + std::to_string(i + 1), d[i]));
  for (int i = 0; i < 5; ++i) gate->pass();
  for (auto& t : threads) t.join();

  ASSERT_EQ(gate->commands.size(), 5u);
  std::vector<std::string> keys;
  for (const auto& c : gate->commands) {
    EXPECT_EQ(c[2], "1");  // one request a call
    keys.push_back(c[3]);
  }
  std::sort(keys.begin(), keys.end());
  for (int i = 0; i < 5; ++i) EXPECT_EQ(keys[i], "redlimit:{gate|u" + std::to_string(i + 1) + "}:sw");
  EXPECT_EQ(gate->starts.size(), 5u);  // five flights
  for (int i = 0; i < 5; ++i) EXPECT_EQ(d[i].remaining, i + 1);
}

// Each caller of a shared call is a call of its own to the MetricsSink and Counters::errors: one
// event each, whose latency counts the caller's wait for the shared call; and when the shared call
// fails, one error event and one error counted per caller.
TEST_F(SyncLaneTest, EachCallerOfASharedCallIsReportedWithItsOwnWaitAndCountedOnFailure) {
  for (const bool fail : {false, true}) {
    SCOPED_TRACE(fail ? "the shared call fails" : "the shared call decides");
    make(true);
    gate->fail_shared = fail;
    Decision a, b, c, d;
    std::thread ta = start("u1", a);
    gate->wait_for_commands(1);
    std::thread tb = start("u2", b);
    gate->wait_for_commands(2);
    std::thread tc = start("u3", c);
    const auto u3_queued = std::chrono::steady_clock::now();  // u3 queued before this
    std::thread td = start("u4", d);
    const auto sent = std::chrono::steady_clock::now();  // the shared call is sent after this
    for (int i = 0; i < 3; ++i) gate->pass();
    for (auto* t : {&ta, &tb, &tc, &td}) t->join();

    ASSERT_EQ(gate->commands.size(), 3u);
    ASSERT_EQ(events->got.size(), 4u);  // one per consume(), the shared call's two callers included
    EXPECT_EQ(thrown.load(), fail ? 2 : 0);
    EXPECT_EQ(rl->counters().errors, fail ? 2u : 0u);
    // u3's latency covers its wait in the queue: from before u3_queued to after `sent`. Failed,
    // u3's event is the longer of the two error events (u4 started after u3).
    int shared_events = 0;
    std::chrono::nanoseconds u3_latency{0};
    for (const auto& [remaining, latency] : events->got) {
      if (remaining == 1 || remaining == 2) continue;  // u1, u2: sent alone
      ++shared_events;
      if (remaining == 3 || remaining == -1) u3_latency = std::max(u3_latency, latency);
    }
    EXPECT_EQ(shared_events, 2);
    EXPECT_GE(u3_latency.count(), std::chrono::nanoseconds(sent - u3_queued).count()) << "ns";
  }
}

TEST_F(SyncLaneTest, ACallAloneGoesAtOnceAndWithTheOptionOffEveryCallGoesAlone) {
  make(false);
  Decision a, b, c;
  std::thread ta = start("u1", a);
  std::thread tb = start("u2", b);
  const auto after_u2 = std::chrono::steady_clock::now();
  std::thread tc = start("u3", c);
  gate->wait_for_commands(3);  // all three on their way at once, each alone
  for (int i = 0; i < 3; ++i) gate->pass();
  for (auto* t : {&ta, &tb, &tc}) t->join();
  ASSERT_EQ(gate->commands.size(), 3u);
  for (const auto& cmd : gate->commands) EXPECT_EQ(cmd[2], "1");
  EXPECT_EQ(a.remaining + b.remaining + c.remaining, 6);

  make(true);  // shared, but nothing else on its way: it goes at once
  gate->pass();
  EXPECT_EQ(fw->consume("u9").remaining, 9);
  ASSERT_EQ(gate->commands.size(), 1u);
  EXPECT_EQ(gate->commands[0][2], "1");
}

}  // namespace

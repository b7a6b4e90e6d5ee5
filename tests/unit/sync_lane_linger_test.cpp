// Options::shared_call_linger (detail/sync_lane.hpp): with one call out at a time (or more), a call
// whose lane is busy waits for as many callers as the last call carried before it goes, and no
// longer than the linger; a call on an idle lane goes at once. Against the held-call connection of
// sync_lane_fixture.hpp, so that the order of events is the test's, not the scheduler's: the long
// lingers below (900 ms, under the default command_timeout of 1 s) are waits the test ends by
// making the call they wait for; a call that went at the linger's end instead would be a call of
// one, which the checks refuse.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "redlimit/errors.hpp"
#include "redlimit/options.hpp"
#include "sync_lane_fixture.hpp"

namespace {

using redlimit::Decision;
using sync_lane_fixture::SyncLaneTest;
using namespace std::chrono_literals;

// The keys of command i, in order (EVALSHA sha numkeys key...).
std::vector<std::string> keys_of(const std::vector<std::string>& command) {
  const std::size_t n = std::stoul(command[2]);
  return {command.begin() + 3, command.begin() + 3 + static_cast<std::ptrdiff_t>(n)};
}

std::string key(int subject) { return "redlimit:{gate|u" + std::to_string(subject) + "}:fw"; }

class SyncLaneLingerTest : public SyncLaneTest {
 protected:
  // u1 goes alone; u2 and u3, queued behind it, go together (the lane is busy: they waited). Then
  // u4 queues behind that shared call of two, which returns: u4 is first, with the flight free.
  void up_to_u4(Decision* d, std::vector<std::thread>& threads) {
    threads.push_back(start("u1", d[0]));
    gate->wait_for_commands(1);
    threads.push_back(start("u2", d[1]));
    threads.push_back(start("u3", d[2]));
    gate->pass();  // u1 back; u2 and u3 go
    gate->wait_for_commands(2);
    threads.push_back(start("u4", d[3]));  // queued behind them
    gate->pass();                          // u2, u3 back
  }
};

// After up_to_u4, u4 holds the next call back until a second caller, u5, comes: a call of two, as
// the last one was, not u4 alone and u5 after it.
TEST_F(SyncLaneLingerTest, ABusyLaneWaitsForAsManyCallersAsTheLastCallCarried) {
  make(true, 0, 900ms, 1);
  Decision d[5];
  std::vector<std::thread> threads;
  up_to_u4(d, threads);
  // Without the wait, u4 would go now, alone; give it the time to, so that u5 comes after.
  EXPECT_FALSE(gate->wait_for_commands(3, 200ms));
  threads.push_back(start("u5", d[4]));
  gate->pass();
  gate->pass();  // to spare: had u4 gone alone, u5 would go alone after it, and not wait here
  for (auto& t : threads) t.join();

  ASSERT_EQ(gate->commands.size(), 3u);
  EXPECT_EQ(keys_of(gate->commands[0]), std::vector<std::string>{key(1)});
  EXPECT_EQ(keys_of(gate->commands[1]), (std::vector<std::string>{key(2), key(3)}));
  EXPECT_EQ(keys_of(gate->commands[2]), (std::vector<std::string>{key(4), key(5)}));
  for (int i = 0; i < 5; ++i) EXPECT_EQ(d[i].remaining, i + 1);
}

// With two calls out at once, the callers that come while a call is held back join it, though the
// other flight is free: u6 holds the call for three callers (the last call carried three), and u7,
// rather than send it at once with the two of them, waits with it for u8.
TEST_F(SyncLaneLingerTest, WithTwoFlightsTheCallersThatComeJoinTheHeldCall) {
  make(true, 0, 900ms, 2);
  Decision d[8];
  std::vector<std::thread> threads;
  threads.push_back(start("u1", d[0]));  // alone: the lane is idle
  gate->wait_for_commands(1);
  threads.push_back(start("u2", d[1]));  // alone, on the second flight: the last call carried one
  gate->wait_for_commands(2);
  for (int i = 3; i <= 5; ++i) threads.push_back(start("u" + std::to_string(i), d[i - 1]));  // queued
  gate->pass();  // u1 or u2 back: u3, u4 and u5 go as one call
  gate->wait_for_commands(3);
  gate->pass();
  gate->pass();
  for (auto& t : threads) t.join();
  threads.clear();
  threads.push_back(start("u6", d[5]));  // the lane idle, but its last call carried three: held
  threads.push_back(start("u7", d[6]));
  EXPECT_FALSE(gate->wait_for_commands(4, 200ms));  // u7 did not send it
  threads.push_back(start("u8", d[7]));
  gate->pass();
  gate->pass();  // to spare: had u7 sent [u6, u7], u8 would go after it, alone
  for (auto& t : threads) t.join();

  ASSERT_EQ(gate->commands.size(), 4u);
  EXPECT_EQ(keys_of(gate->commands[2]), (std::vector<std::string>{key(3), key(4), key(5)}));
  EXPECT_EQ(keys_of(gate->commands[3]), (std::vector<std::string>{key(6), key(7), key(8)}));
  for (int i = 0; i < 8; ++i) EXPECT_EQ(d[i].remaining, i + 1);
}

// The same start, but nobody joins u4: it goes alone once the linger (50 ms) has passed.
TEST_F(SyncLaneLingerTest, AHeldCallGoesAloneWhenTheLingerEnds) {
  make(true, 0, 50ms, 1);
  Decision d[4];
  std::vector<std::thread> threads;
  up_to_u4(d, threads);
  gate->wait_for_commands(3);  // u4 alone, after the linger
  gate->pass();
  for (auto& t : threads) t.join();

  ASSERT_EQ(gate->commands.size(), 3u);
  EXPECT_EQ(keys_of(gate->commands[2]), std::vector<std::string>{key(4)});
  EXPECT_EQ(d[3].remaining, 4);
}

// A call on an idle lane (nothing on its way, the last call of one caller or none) goes at once,
// however long the linger.
TEST_F(SyncLaneLingerTest, ACallOnAnIdleLaneNeverLingers) {
  make(true, 0, 900ms, 1);
  for (int i = 1; i <= 3; ++i) {
    gate->pass();
    const auto started = std::chrono::steady_clock::now();
    EXPECT_EQ(fw->consume("u" + std::to_string(i)).remaining, i);
    EXPECT_LT(std::chrono::steady_clock::now() - started, 900ms);
  }
  EXPECT_EQ(gate->commands.size(), 3u);
}

// A linger that is negative, past a second, or as long as the calls' deadline is refused before
// any I/O.
TEST_F(SyncLaneLingerTest, ABadLingerIsRefused) {
  make(true);
  for (const auto linger : {std::chrono::microseconds(-1), std::chrono::microseconds(1'000'001),
                            std::chrono::microseconds(std::chrono::milliseconds(300))}) {
    SCOPED_TRACE(linger.count());
    redlimit::Options o;
    o.command_timeout = 300ms;
    o.shared_call_linger = linger;
    EXPECT_THROW(redlimit::RateLimiter(gate, o), redlimit::InvalidArgument);
  }
  EXPECT_TRUE(gate->commands.empty());
}

}  // namespace

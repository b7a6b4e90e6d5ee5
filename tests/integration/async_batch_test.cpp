// consume_many_async / consume_many_future over AsyncRedis on libevent: a batch decided exactly as
// consume_many decides it, its script calls pipelined on one connection, input checked before
// anything is sent, and the failure policy for a batch that cannot reach Redis (fixture:
// async_fixture.hpp).
#include "integration/async_fixture.hpp"

namespace redlimit_test {
namespace {

#ifdef REDLIMIT_HAVE_LIBEVENT

using redlimit::Request;

// The decisions of a batch as a future, with the thread its callback ran on.
using Delivered = std::pair<std::vector<Decision>, std::thread::id>;
std::future<Delivered> deliver_many(const redlimit::Strategy& s, const std::vector<Request>& requests) {
  auto p = std::make_shared<std::promise<Delivered>>();
  auto f = p->get_future();
  s.consume_many_async(requests, [p](const std::vector<Decision>& ds, std::exception_ptr e) {
    if (e) {
      p->set_exception(e);
    } else {
      p->set_value({ds, std::this_thread::get_id()});
    }
  });
  return f;
}

// 3 subjects x 250 requests, interleaved, with costs 1 and 2: 750 requests, three script calls (256
// a call), all in flight at once on one connection. Every decision is the one a consume_many of the
// same requests makes on a twin resource at the same (held) time, in order, down to retry_after.
TEST_F(AsyncTest, ABatchIsDecidedInOrderExactlyAsConsumeManyDecidesIt) {
  LibeventLoop loop;
  {
    auto redis = loop.attach(endpoint_of(server()));
    auto rl = redlimit::RateLimiter::connect(server().url(), options());
    rl.attach_async(redis);
    const auto async_fw = rl.fixed_window("batch.async", Limit(100, 1min));
    const auto sync_fw = rl.fixed_window("batch.sync", Limit(100, 1min));
    const std::vector<std::string> subjects{"a", "b", "c"};
    std::vector<Request> requests;
    for (int i = 0; i < 250; ++i) {
      for (const auto& s : subjects) requests.push_back({s, 1 + (i % 2)});
    }
    loop.start();
    auto warm = async_fw.consume_future("warm-up");  // settles the script path (FUNCTION LOAD)
    EXPECT_TRUE(get_within(warm).allowed);
    const auto sent_before = redis->stats().commands;
    auto f = deliver_many(async_fw, requests);
    const auto [got, thread] = get_within(f);
    const auto want = sync_fw.consume_many(requests);

    ASSERT_EQ(got.size(), requests.size());
    ASSERT_EQ(want.size(), requests.size());
    int allowed = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].allowed, want[i].allowed) << i;
      EXPECT_EQ(got[i].remaining, want[i].remaining) << i;
      EXPECT_EQ(got[i].retry_after, want[i].retry_after) << i;
      EXPECT_EQ(got[i].reset_after, want[i].reset_after) << i;
      EXPECT_EQ(got[i].limit, 100) << i;
      EXPECT_EQ(got[i].source, Source::primary) << i;
      allowed += got[i].allowed ? 1 : 0;
    }
    // Costs alternate 1, 2 per subject: 33 pairs fill 99 units, then one more 1 fits; the rest wait.
    EXPECT_EQ(allowed, 3 * 67);
    EXPECT_EQ(thread, loop.id()) << "the callback runs on the loop's thread";
    EXPECT_EQ(redis->stats().commands - sent_before, 3u) << "750 requests: three script calls of at most 256";
    const auto c = rl.counters();
    EXPECT_EQ(c.decisions, 2 * requests.size() + 1);  // both batches and the warm-up
    EXPECT_EQ(c.errors, 0u);
    for (const auto& s : subjects) EXPECT_EQ(async_fw.peek(s).remaining, 0) << s;
  }
  loop.stop();
}

// A future of the decisions; an empty batch is answered at once (on the loop) and sends nothing.
TEST_F(AsyncTest, ManyFutureAndAnEmptyBatch) {
  LibeventLoop loop;
  {
    auto redis = loop.attach(endpoint_of(server()));
    auto rl = redlimit::RateLimiter::connect(server().url(), options());
    rl.attach_async(redis);
    const auto tb = rl.token_bucket("batch.future", 5, 5, 1min);
    loop.start();
    auto empty = tb.consume_many_future({});
    EXPECT_TRUE(get_within(empty).empty());
    EXPECT_EQ(redis->stats().commands, 0u);

    auto f = tb.consume_many_future({{"x", 2}, {"x", 2}, {"x", 2}, {"y", 5}});
    const auto ds = get_within(f);
    ASSERT_EQ(ds.size(), 4u);
    EXPECT_TRUE(ds[0].allowed);
    EXPECT_EQ(ds[0].remaining, 3);
    EXPECT_TRUE(ds[1].allowed);
    EXPECT_EQ(ds[1].remaining, 1);
    EXPECT_FALSE(ds[2].allowed);
    EXPECT_EQ(ds[2].retry_after, 12s);  // 1 token a 12 s: the missing one
    EXPECT_TRUE(ds[3].allowed);
    EXPECT_EQ(ds[3].remaining, 0);
    EXPECT_EQ(redis->stats().commands, 1u);
  }
  loop.stop();
}

// A bad request anywhere in the batch, a missing callback or no async connection: a redlimit
// exception from the call itself, and nothing is queued or written.
TEST_F(AsyncTest, ABadBatchThrowsBeforeAnythingIsSent) {
  LibeventLoop loop;
  {
    auto redis = loop.attach(endpoint_of(server()));
    auto rl = redlimit::RateLimiter::connect(server().url(), options());
    const auto fw = rl.fixed_window("batch.bad", Limit(10, 1min));
    EXPECT_THROW(fw.consume_many_future({{"a", 1}}), redlimit::Error) << "no async connection attached";
    rl.attach_async(redis);
    loop.start();
    EXPECT_THROW(fw.consume_many_future({{"a", 1}, {"b", 0}}), redlimit::InvalidArgument);
    EXPECT_THROW(fw.consume_many_future({{"a", 1}, {"b", 11}}), redlimit::InvalidArgument);
    EXPECT_THROW(fw.consume_many_future({{"a", 1}, {"", 1}}), redlimit::InvalidArgument);
    EXPECT_THROW(fw.consume_many_async({{"a", 1}}, nullptr), redlimit::InvalidArgument);
    EXPECT_EQ(redis->stats().commands, 0u);
    EXPECT_EQ(server().command({"DBSIZE"}).integer, 0);
  }
  loop.stop();
}

// Redis unreachable: the batch's send step fails as a whole, and the failure policy answers each
// request (here: allow), one error counted for the call, on the loop's thread.
TEST_F(AsyncTest, AnUnreachableServerGetsTheFailurePolicyForEveryRequestOfABatch) {
  LibeventLoop loop;
  {
    auto redis = loop.attach(refusing_endpoint(server()));  // refused at once, every time
    redlimit::Options o = options();
    o.on_failure = redlimit::OnFailure::fail_open;
    auto rl = redlimit::RateLimiter::connect(server().url(), o);
    rl.attach_async(redis);
    const auto fw = rl.fixed_window("batch.down", Limit(1, 1min));
    std::vector<Request> requests(300, Request{"x", 1});  // two script calls
    loop.start();
    auto f = deliver_many(fw, requests);
    const auto [ds, thread] = get_within(f);
    ASSERT_EQ(ds.size(), requests.size());
    for (const auto& d : ds) {
      EXPECT_TRUE(d.allowed);
      EXPECT_EQ(d.source, Source::failure_policy);
    }
    EXPECT_EQ(thread, loop.id());
    const auto c = rl.counters();
    EXPECT_EQ(c.errors, 1u);
    EXPECT_EQ(c.from_failure_policy, requests.size());
  }
  loop.stop();
}

#endif  // REDLIMIT_HAVE_LIBEVENT

}  // namespace
}  // namespace redlimit_test

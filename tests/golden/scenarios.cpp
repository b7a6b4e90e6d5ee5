// The scenarios the golden traces record, and the recording Connection. Fixed and deterministic: a
// ManualClock gives the client time, and the only randomness is none. The client clock stays well
// inside windows (never within 50 ms of an edge), so no TTL a script sets is shorter than the
// recording takes: Redis expires keys in real time, and a key gone early would record an answer the
// scenario's clock does not explain.
#include <chrono>
#include <exception>
#include <functional>
#include <stdexcept>
#include <utility>

#include "golden.hpp"
#include "redlimit/detail/scripts.hpp"
#include "redlimit/redlimit.hpp"

namespace redlimit_golden {

using redlimit::Decision;
using redlimit::Limit;
using redlimit::Micros;
using redlimit::Reply;
using namespace std::chrono_literals;

namespace {

// 2023-11-14T22:00:00Z plus 123 ms: aligned to no window edge.
constexpr Micros kT0{1'699'999'200'123'000};

std::int64_t server_time(redlimit::Connection& redis) {
  const Reply r = redis.command({"TIME"});
  if (r.type != Reply::Type::array || r.elements.size() != 2) throw std::runtime_error("TIME: " + show(r));
  return std::stoll(r.elements[0].str) * 1'000'000 + std::stoll(r.elements[1].str);
}

// Passes every command to Redis and records it with its reply and the client clock.
class Recording final : public redlimit::Connection {
 public:
  Recording(std::shared_ptr<redlimit::Connection> redis, std::shared_ptr<redlimit::ManualClock> clock, Trace& trace)
      : redis_(std::move(redis)), clock_(std::move(clock)), trace_(trace) {}

  Reply command(const std::vector<std::string>& argv) override {
    Command c;
    c.at = clock_->now().count();
    c.argv = argv;
    c.redis_time = redis_time;
    if (redis_time) c.time_before = server_time(*redis_);
    c.reply = redis_->command(argv);
    if (redis_time) c.time_after = server_time(*redis_);
    trace_.commands.push_back(c);
    return c.reply;
  }

  bool redis_time = false;

 private:
  std::shared_ptr<redlimit::Connection> redis_;
  std::shared_ptr<redlimit::ManualClock> clock_;
  Trace& trace_;
};

struct Env {
  std::shared_ptr<redlimit::ManualClock> clock;
  std::shared_ptr<Recording> recording;
  std::shared_ptr<redlimit::Connection> redis;  // unrecorded: setup only
  redlimit::RateLimiter limiter;

  void advance(Micros d) { clock->advance(d); }
};

// A decision the limiter could not make (the script failed) is part of the trace already: the
// command's error reply. The scenario goes on.
template <class F>
void attempt(F&& f) {
  try {
    f();
  } catch (const std::exception&) {
  }
}

// The same walk for every strategy: admissions up to and past the limit, a larger cost, peeks,
// refunds, blocks (of a subject with a state and of one without) and their lifting, a reset, time passing within
// and past the windows.
template <class S>
void walk(Env& e, const S& s) {
  for (int i = 0; i < 4; ++i) {
    s.consume("alice", 1);
    e.advance(40ms);
  }
  s.consume("alice", 2);
  s.consume("alice", 3);
  s.peek("alice", 1);
  s.peek("bob", 2);
  s.refund("alice", 1);
  s.consume("alice", 1);
  e.advance(300ms);
  s.consume("alice", 1);
  s.consume("bob", 4);
  s.block("bob", 1500ms);
  s.consume("bob", 1);
  s.peek("bob", 1);
  s.refund("bob", 2);
  e.advance(200ms);
  s.block("bob", 100ms);  // never shortens the block in force
  s.consume("bob", 1);
  s.unblock("bob");  // lifted: the count from before and during the block stays
  s.consume("bob", 1);
  s.unblock("bob");  // none in force
  s.block("bob", 1500ms);
  s.block("dan", 300ms);  // a subject never seen: a string state is the block alone
  s.refund("dan", 1);
  s.consume("dan", 1);
  s.unblock("dan");  // the block alone: its key goes
  s.consume("dan", 1);
  s.block("dan", 300ms);
  e.advance(2s);
  s.consume("bob", 1);
  s.peek("dan", 1);  // read past a block that has ended (a sliding log's member is still there)
  s.consume("dan", 1);
  s.consume("alice", 1);
  s.reset("alice");
  s.consume("alice", 1);
  e.advance(400ms);
  for (int i = 0; i < 6; ++i) s.consume("carol", 1);
  attempt([&] { s.refund("carol", 10); });
  s.peek("carol", 1);
  e.advance(2h);
  s.consume("alice", 1);
  s.peek("carol", 1);
}

// Batches: repeated subjects (later requests see earlier ones' writes), rejections repeated
// within a batch (the epilogue's memo), a blocked subject, 300 requests (two script calls), and
// a batch of distinct subjects.
template <class S>
void batches(Env& e, const S& s) {
  std::vector<redlimit::Request> r{{"ann", 1}, {"ben", 2}, {"ann", 2}, {"ann", 1}, {"ann", 1}, {"ben", 1},
                                   {"ann", 3}, {"ann", 1}, {"cid", 1}, {"ann", 1}};
  s.consume_many(r);
  e.advance(100ms);
  s.block("cid", 1s);
  s.consume_many(r);
  e.advance(300ms);
  s.consume_many({{"ann", 1}});
  std::vector<redlimit::Request> big;
  const char* who[] = {"ann", "ben", "cid", "dot"};
  for (int i = 0; i < 300; ++i) big.push_back({who[i % 4], 1 + i % 2});
  e.advance(2s);
  s.consume_many(big);
  e.advance(150ms);
  s.consume_many(big);
  s.peek("dot", 1);
  // Subjects that all differ (mode "4", lua/prologue.lua: no table of writes, no memo of
  // rejections), among them a blocked one, full ones, and costs that differ.
  e.advance(50ms);
  s.block("eve", 1s);
  s.consume_many({{"ann", 2}, {"ben", 1}, {"cid", 1}, {"dot", 3}, {"eve", 1}, {"fay", 4}});
}

using Runner = std::function<void(Env&)>;

template <class Make>
std::pair<std::string, Runner> each(std::string name, Make make, bool batch) {
  return {std::move(name), [make, batch](Env& e) {
            const auto s = make(e.limiter);
            if (batch) {
              batches(e, s);
            } else {
              walk(e, s);
            }
          }};
}

// A key of another type under one subject's state key (lua/epilogue.lua, foreign keys): a plain
// string where a sorted set or a hash belongs (sliding log, policy) reads as no state and is
// deleted before the write; under a string state it reads as none and is overwritten. Either way
// no other request of a batch is touched, and nothing fails.
template <class S>
void wrong_type(Env& e, const S& s) {
  s.consume("ann", 1);
  e.recording->command({"SET", s.key_for("bad"), "not a state"});  // recorded: the replay does it too
  s.consume_many({{"ann", 1}, {"ben", 1}, {"bad", 1}, {"ann", 1}});
  s.peek("ann", 1);
  s.peek("ben", 1);
  e.recording->command({"SET", s.key_for("bad"), "not a state"});
  s.peek("bad", 1);
  s.consume("bad", 1);
  e.recording->command({"SET", s.key_for("bad"), "not a state"});
  s.consume_many({{"bad", 1}, {"ann", 1}});
  s.peek("ann", 1);
}

std::vector<std::pair<std::string, Runner>> scenarios() {
  using L = redlimit::RateLimiter;
  std::vector<std::pair<std::string, Runner>> out;
  for (const bool batch : {false, true}) {
    const std::string suffix = batch ? "_batches" : "";
    out.push_back(each("fixed_window" + suffix, [](const L& l) { return l.fixed_window("fw", Limit(5, 1s)); }, batch));
    out.push_back(each("sliding_log" + suffix, [](const L& l) { return l.sliding_log("sl", Limit(5, 1s)); }, batch));
    out.push_back(each("sliding_window" + suffix,
                       [](const L& l) { return l.sliding_window("sw", Limit(6, 1s), 250ms); }, batch));
    out.push_back(each("token_bucket" + suffix, [](const L& l) { return l.token_bucket("tb", 5, 3, 1s); }, batch));
    out.push_back(each("leaky_meter" + suffix,
                       [](const L& l) { return l.leaky_bucket("lm", 5, Limit(3, 1s), redlimit::LeakyMode::meter); },
                       batch));
    out.push_back(each("leaky_shaper" + suffix,
                       [](const L& l) { return l.leaky_bucket("ls", 5, Limit(3, 1s), redlimit::LeakyMode::shaper); },
                       batch));
    out.push_back(each("policy2" + suffix,
                       [](const L& l) { return l.policy("p2", redlimit::parse_limits("5/s; 12/min")); }, batch));
    out.push_back(each("policy3" + suffix,
                       [](const L& l) { return l.policy("p3", redlimit::parse_limits("5/s; 8/10s@1s; 20/h@1m")); },
                       batch));
  }
  out.emplace_back("wrong_type", [](Env& e) {
    wrong_type(e, e.limiter.sliding_log("wl", Limit(5, 1s)));
    wrong_type(e, e.limiter.policy("wp", redlimit::parse_limits("3/s; 8/min")));
    wrong_type(e, e.limiter.fixed_window("wf", Limit(5, 1s)));
    wrong_type(e, e.limiter.token_bucket("wt", 5, 3, 1s));
  });
  // Redis TIME: the answers depend on when the server read its clock; the rates are slow enough
  // that allowed and remaining do not, in the milliseconds a recording takes.
  out.emplace_back("redis_time", [](Env& e) {
    e.recording->redis_time = true;
    const auto tb = e.limiter.token_bucket("rt", 4, 1, 1h);
    const auto sl = e.limiter.sliding_log("rl", Limit(3, 1h));
    const auto lb = e.limiter.leaky_bucket("rb", 3, Limit(1, 1h));
    const auto po = e.limiter.policy("rp", redlimit::parse_limits("3/1h; 5/2h"));
    for (int i = 0; i < 5; ++i) {
      tb.consume("u", 1);
      sl.consume("u", 1);
      lb.consume("u", 1);
      po.consume("u", 1);
    }
    tb.refund("u", 2);
    sl.peek("u", 1);
    tb.consume_many({{"v", 1}, {"v", 2}, {"v", 2}, {"w", 1}, {"v", 1}});
    po.consume_many({{"v", 1}, {"v", 1}, {"v", 2}, {"v", 1}, {"w", 1}});
  });
  return out;
}

}  // namespace

std::vector<std::string> scenario_names() {
  std::vector<std::string> names;
  for (const auto& [name, run] : scenarios()) names.push_back(name);
  return names;
}

Trace record(const std::string& scenario, const std::shared_ptr<redlimit::Connection>& redis) {
  namespace scripts = redlimit::detail::scripts;
  Trace trace;
  trace.scenario = scenario;
  // Every script cached (no NOSCRIPT round trip in the trace) and no key left from an earlier run.
  for (const auto* s : {&scripts::fixed_window(), &scripts::sliding_log(), &scripts::policy(),
                        &scripts::token_bucket(), &scripts::leaky_bucket(), &scripts::block()}) {
    trace.scripts[std::string(s->name)] = s->sha1;
    const Reply r = redis->command({"SCRIPT", "LOAD", std::string(s->source)});
    if (r.is_error()) throw std::runtime_error("SCRIPT LOAD: " + r.str);
  }
  redis->command({"EVAL", "for _, k in ipairs(redis.call('KEYS', 'golden:*')) do redis.call('DEL', k) end", "0"});

  for (const auto& [name, run] : scenarios()) {
    if (name != scenario) continue;
    auto clock = std::make_shared<redlimit::ManualClock>(kT0);
    auto recording = std::make_shared<Recording>(redis, clock, trace);
    redlimit::Options options;
    options.clock = clock;
    options.prefix = "golden:";
    if (scenario == "redis_time") options.time_source = redlimit::TimeSource::redis;
    Env env{clock, recording, redis, redlimit::RateLimiter(recording, options)};
    run(env);
    return trace;
  }
  throw std::runtime_error("no scenario named " + scenario);
}

}  // namespace redlimit_golden

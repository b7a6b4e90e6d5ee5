// Hostile subjects and resource names, and invalid input: any bytes up to 1 KiB are a subject of
// their own; nothing can name another subject's or resource's key; bad input throws before any I/O.
#include <algorithm>
#include <set>

#include "support/fixture.hpp"

namespace redlimit_test {
namespace {

class SubjectsTest : public StrictRedisTest {};

std::vector<std::string> hostile_subjects() {
  using namespace std::string_literals;
  return {
      "a:b",       "a",         ":b",          "{a}",     "}{",        "{",        "}",
      "%7B",       "%",         "%25",         "a|b",     "|",         "\0"s,      "x\0y"s,
      "x"s,        "x\0"s,      "\0\0"s,       "\xff\xfe\xfd"s,        "\xc3\x28"s, "\xe6\x97\xa5\xe6\x9c\xac",
      "with space", "\r\n*1\r\n$4\r\nPING\r\n"s, "\x7f\x01\x1f"s,     "KEYS *",   std::string(1024, 'z'),
      std::string(1024, '{'),  std::string(1023, ':') + "\0"s,
  };
}

TEST_F(SubjectsTest, EverySubjectHasItsOwnStateInEveryStrategy) {
  const auto subjects = hostile_subjects();
  ASSERT_EQ(std::set<std::string>(subjects.begin(), subjects.end()).size(), subjects.size());
  at(0s);
  const auto strategies = all_strategies(rl(), "hostile", 3, 1h);
  for (const auto& s : strategies) {
    SCOPED_TRACE(s.name);
    for (const auto& subject : subjects) {
      const Decision d = s.consume(subject, 1);
      EXPECT_TRUE(d.allowed) << d;
      EXPECT_EQ(d.remaining, 2) << "subject of " << subject.size() << " bytes shares state: " << d;
    }
  }
  EXPECT_EQ(dbsize(), static_cast<std::int64_t>(strategies.size() * subjects.size()));
  for (const auto& s : strategies) {
    SCOPED_TRACE(s.name);
    std::set<std::string> keys;
    for (const auto& subject : subjects) {
      const std::string key = s.key_for(subject);
      keys.insert(key);
      EXPECT_EQ(server().integer({"EXISTS", key}), 1);
      // The hash tag is ours: exactly one '{' and one '}', so it can be neither closed early nor forged.
      EXPECT_EQ(std::count(key.begin(), key.end(), '{'), 1) << key;
      EXPECT_EQ(std::count(key.begin(), key.end(), '}'), 1) << key;
      EXPECT_EQ(key.rfind("redlimit:{", 0), 0u) << key;
      // The second request of each subject sees exactly its own first one.
      const Decision d = s.consume(subject, 1);
      EXPECT_TRUE(d.allowed) << d;
      EXPECT_EQ(d.remaining, 1) << d;
    }
    EXPECT_EQ(keys.size(), subjects.size());
  }
}

TEST_F(SubjectsTest, OversizedSubjectIsRejectedBeforeAnyIo) {
  at(0s);
  for (const auto& s : all_strategies(rl(), "big", 3, 1h)) {
    SCOPED_TRACE(s.name);
    EXPECT_TRUE(s.consume(std::string(1024, 's'), 1).allowed);
  }
  const std::int64_t keys_before = dbsize();
  const std::int64_t evalsha_before = command_calls("evalsha");
  const std::int64_t del_before = command_calls("del");
  const std::string too_long(1025, 's');
  for (const auto& s : all_strategies(rl(), "big", 3, 1h)) {
    SCOPED_TRACE(s.name);
    EXPECT_THROW(s.consume(too_long, 1), redlimit::InvalidArgument);
    EXPECT_THROW(s.peek(too_long, 1), redlimit::InvalidArgument);
    EXPECT_THROW(s.reset(too_long), redlimit::InvalidArgument);
    EXPECT_THROW(s.key_for(too_long), redlimit::InvalidArgument);
    EXPECT_THROW(s.consume(std::string(4096, '\0'), 1), redlimit::InvalidArgument);
  }
  EXPECT_EQ(dbsize(), keys_before);
  EXPECT_EQ(command_calls("evalsha"), evalsha_before);
  EXPECT_EQ(command_calls("del"), del_before);
}

TEST_F(SubjectsTest, ResourceAndSubjectSplitsNeverShareState) {
  struct Pair {
    std::string resource, subject;
  };
  const std::vector<std::pair<Pair, Pair>> pairs = {
      {{"a", "b:c"}, {"a:b", "c"}},  {{"a", "b|c"}, {"a|b", "c"}}, {{"a", "}b"}, {"a}", "b"}},
      {{"a", "{b"}, {"a{", "b"}},    {{"a", "%7Cb"}, {"a|", "b"}}, {{"a", "b}:sl"}, {"a", "b"}},
      {{"a", "b|c:d"}, {"a|b", "c:d"}},
  };
  at(0s);
  for (const auto& [first, second] : pairs) {
    SCOPED_TRACE("(" + first.resource + ", " + first.subject + ") vs (" + second.resource + ", " +
                 second.subject + ")");
    auto one = rl().fixed_window(first.resource, Limit(1, 1h));
    auto two = rl().fixed_window(second.resource, Limit(1, 1h));
    EXPECT_NE(one.key_for(first.subject), two.key_for(second.subject));
    EXPECT_TRUE(one.consume(first.subject).allowed);
    EXPECT_FALSE(one.peek(first.subject).allowed);
    const Decision d = two.consume(second.subject);
    EXPECT_TRUE(d.allowed) << d;
    EXPECT_EQ(d.remaining, 0) << d;
    one.reset(first.subject);
    EXPECT_FALSE(two.peek(second.subject).allowed);  // resetting one left the other alone
    two.reset(second.subject);
  }
  EXPECT_EQ(dbsize(), 0);
}

TEST_F(SubjectsTest, StrategiesSharingAResourceNameNeverShareState) {
  at(0s);
  const Limit lim(1, 1h);
  auto fw = rl().fixed_window("same", lim);
  auto sl = rl().sliding_log("same", lim);
  auto sw = rl().sliding_window("same", lim);
  auto tb = rl().token_bucket("same", 1, 1, 1h);
  auto lb = rl().leaky_bucket("same", 1, lim);
  EXPECT_TRUE(fw.consume("u").allowed);
  EXPECT_TRUE(sl.consume("u").allowed);
  EXPECT_TRUE(sw.consume("u").allowed);
  EXPECT_TRUE(tb.consume("u").allowed);
  EXPECT_TRUE(lb.consume("u").allowed);
  EXPECT_EQ(dbsize(), 5);
}

TEST_F(SubjectsTest, PrefixesSeparateLimiters) {
  at(0s);
  redlimit::Options o = options();
  o.prefix = "other-app:";
  auto other = redlimit::RateLimiter::connect(server().url(), o);
  auto mine = rl().fixed_window("r", Limit(1, 1h));
  auto theirs = other.fixed_window("r", Limit(1, 1h));
  EXPECT_TRUE(mine.consume("u").allowed);
  EXPECT_TRUE(theirs.consume("u").allowed);
  EXPECT_EQ(theirs.key_for("u").rfind("other-app:{", 0), 0u);
  EXPECT_EQ(server().integer({"EXISTS", theirs.key_for("u")}), 1);
  EXPECT_EQ(dbsize(), 2);
}

TEST_F(SubjectsTest, InvalidInputThrowsAndWritesNothing) {
  at(0s);
  const auto strategies = all_strategies(rl(), "bad", 5, 1h);
  for (const auto& s : strategies) s.consume("existing", 2);
  const std::int64_t keys_before = dbsize();
  const std::int64_t evalsha_before = command_calls("evalsha");
  const std::int64_t eval_before = command_calls("eval");
  for (const auto& s : strategies) {
    SCOPED_TRACE(s.name);
    for (std::int64_t cost : {std::int64_t{0}, std::int64_t{-1}, std::int64_t{6}, std::int64_t{1} << 62}) {
      SCOPED_TRACE("cost " + std::to_string(cost));
      EXPECT_THROW(s.consume("existing", cost), redlimit::InvalidArgument);
      EXPECT_THROW(s.peek("existing", cost), redlimit::InvalidArgument);
      EXPECT_THROW(s.consume("new", cost), redlimit::InvalidArgument);
    }
    EXPECT_THROW(s.consume("", 1), redlimit::InvalidArgument);
    EXPECT_THROW(s.peek("", 1), redlimit::InvalidArgument);
    EXPECT_THROW(s.reset(""), redlimit::InvalidArgument);
  }
  EXPECT_EQ(dbsize(), keys_before);
  EXPECT_EQ(command_calls("evalsha"), evalsha_before);
  EXPECT_EQ(command_calls("eval"), eval_before);
  // The existing state is untouched: 3 of 5 left everywhere.
  for (const auto& s : strategies) {
    SCOPED_TRACE(s.name);
    EXPECT_EQ(s.peek("existing", 1).remaining, 3);
  }
}

TEST_F(SubjectsTest, InvalidConfigurationThrows) {
  EXPECT_THROW(Limit(0, 1s), redlimit::InvalidArgument);
  EXPECT_THROW(Limit(-1, 1s), redlimit::InvalidArgument);
  EXPECT_THROW(Limit(1, 0s), redlimit::InvalidArgument);
  EXPECT_THROW(Limit(1, -1s), redlimit::InvalidArgument);
  EXPECT_THROW(rl().fixed_window("", Limit(1, 1s)), redlimit::InvalidArgument);
  EXPECT_THROW(rl().sliding_log(std::string(257, 'r'), Limit(1, 1s)), redlimit::InvalidArgument);
  EXPECT_THROW(rl().sliding_window("r", Limit(1, 1min), 7s), redlimit::InvalidArgument);  // 7 s does not divide 60 s
  EXPECT_THROW(rl().token_bucket("r", 0, 1, 1s), redlimit::InvalidArgument);
  EXPECT_THROW(rl().token_bucket("r", 1, 0, 1s), redlimit::InvalidArgument);
  EXPECT_THROW(rl().token_bucket("r", 1, 1, 0s), redlimit::InvalidArgument);
  EXPECT_THROW(rl().leaky_bucket("r", 0, Limit(1, 1s)), redlimit::InvalidArgument);
  redlimit::Options braces = options();
  braces.prefix = "app{x}:";
  EXPECT_THROW(redlimit::RateLimiter::connect(server().url(), braces), redlimit::InvalidArgument);
  EXPECT_THROW(redlimit::RateLimiter::connect("http://127.0.0.1:1/0"), redlimit::InvalidArgument);
  EXPECT_EQ(dbsize(), 0);
}

}  // namespace
}  // namespace redlimit_test

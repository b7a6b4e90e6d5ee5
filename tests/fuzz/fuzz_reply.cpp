// The reply decoder fed arbitrary hiredis reply trees. The input is raw RESP; a real hiredis
// redisReader (the parser RedisConnection reads with) turns it into redisReply trees, which are
// converted to redlimit::Reply and decoded with detail::decode_decision against a few limit vectors,
// and with detail::decode_decisions as the reply of a batch.
// Only ReplyError may escape; decode_decision must accept exactly the documented shape
// ({allowed, remaining, retry_after_us, reset_after_us, delay_us}, its short forms for an admission
// with retry and delay 0, the integer reset_after_us * (limit + 1) + remaining (a strategy of one
// limit) and {remaining, reset_after_us}, or a policy's 6 + 2m with the
// deciding limit 1..m and each limit's remaining and reset, or for a policy's admission its m pairs
// alone; non-negative integers, allowed in {0, 1}) and copy its fields faithfully; decode_decisions a batch's decisions
// one after the other in the forms lua/epilogue.lua's reply describes; policy_pairs_of a policy's
// packed admission (an integer reply, or a string reply as the time its call sent).
//
// The conversion is the library's own detail::from_hiredis, the one both connections use.
#include <hiredis/hiredis.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_check.hpp"
#include "hiredis/hiredis_reply.hpp"
#include "redlimit/decision.hpp"
#include "redlimit/detail/decode.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/reply.hpp"

namespace {

using redlimit::Reply;


// hiredis 0.14 allocates an array's element vector as soon as it reads "*N": "*2000000000\r\n"
// asks for 16 GB, which libFuzzer would report as an out-of-memory crash (in hiredis, not in us).
// The reader's own object functions are kept; only huge arrays are refused (the reader then fails
// with an out-of-memory error, as it would on a failed allocation).
constexpr int kMaxElements = 1 << 16;
redisReplyObjectFunctions* g_hiredis_fn = nullptr;
redisReplyObjectFunctions g_capped_fn;

void* capped_create_array(const redisReadTask* task, int elements) {
  if (elements > kMaxElements) return nullptr;
  return g_hiredis_fn->createArray(task, elements);
}

std::size_t policy_width(const std::vector<std::int64_t>& limits) { return 6 + 2 * limits.size(); }

// A policy's admission (m > 1 limits): its limits' pairs alone.
bool policy_admission(const Reply& reply, const std::vector<std::int64_t>& limits) {
  return reply.type == Reply::Type::array && limits.size() > 1 && reply.elements.size() == 2 * limits.size();
}

// The whole decision a policy's admission stands for (lua/parts/policy_writes.lua, conclude): allowed, the least
// remaining, no retry, the latest reset, no delay, the first limit with the least left, the pairs.
Reply whole_admission(const Reply& pairs) {
  const auto& p = pairs.elements;
  std::size_t least = 0;
  std::int64_t latest = 0;
  for (std::size_t i = 0; i < p.size(); i += 2) {
    if (p[i].integer < p[least].integer) least = i;
    if (p[i + 1].integer > latest) latest = p[i + 1].integer;
  }
  std::vector<Reply> v;
  for (const std::int64_t x : {std::int64_t{1}, p[least].integer, std::int64_t{0}, latest, std::int64_t{0},
                               static_cast<std::int64_t>(least / 2 + 1)}) {
    v.push_back(Reply::make_integer(x));
  }
  v.insert(v.end(), p.begin(), p.end());
  return Reply::make_array(std::move(v));
}

bool well_formed(const Reply& reply, const std::vector<std::int64_t>& limits) {
  if (reply.type != Reply::Type::array) return false;
  const auto& v = reply.elements;
  if (policy_admission(reply, limits)) {
    for (const Reply& e : v) {
      if (e.type != Reply::Type::integer || e.integer < 0) return false;
    }
    return true;
  }
  const bool policy = v.size() == policy_width(limits);
  const bool short_form = v.size() == 2;  // {remaining, reset_after}: an admission, no retry or delay
  if (v.size() != 5 && !short_form && !policy) return false;
  for (const Reply& e : v) {
    if (e.type != Reply::Type::integer || e.integer < 0) return false;
  }
  if (!short_form && v[0].integer > 1) return false;
  if (limits.empty()) return false;
  if (policy && (v[5].integer < 1 || static_cast<std::uint64_t>(v[5].integer) > limits.size())) return false;
  return true;
}

// decode_decision of `reply` into d, held to the model's verdict `valid`: it must refuse the reply
// exactly when the model does. False when it refused it.
bool decoded(const Reply& reply, const std::vector<std::int64_t>& limits, bool valid, redlimit::Decision& d) {
  try {
    d = redlimit::detail::decode_decision(reply, limits);
  } catch (const redlimit::ReplyError& e) {
    FUZZ_CHECK(!valid, "a well-formed reply was rejected: %s", e.what());
    return false;
  }
  FUZZ_CHECK(valid, "a malformed reply was accepted");
  return true;
}

// An integer: one request's admission packed by its one limit (lua/epilogue.lua, reply).
void decode_packed(const Reply& reply, const std::vector<std::int64_t>& limits) {
  const bool valid = limits.size() == 1 && limits[0] >= 1 && limits[0] < (std::int64_t{1} << 53) && reply.integer >= 0;
  redlimit::Decision d;
  if (!decoded(reply, limits, valid, d)) return;
  const std::int64_t radix = limits[0] + 1;
  FUZZ_CHECK(d.allowed && d.limit == limits[0] && d.limit_index == 0, "allowed or limit");
  FUZZ_CHECK(d.remaining >= 0 && d.remaining <= limits[0] && d.reset_after.count() >= 0, "a field out of range");
  FUZZ_CHECK(d.reset_after.count() * radix + d.remaining == reply.integer, "not the packed figures");
  FUZZ_CHECK(d.retry_after.count() == 0 && d.delay.count() == 0 && d.limits.empty(), "retry, delay or states");
}

// A policy's admission packed as one integer (lua/policy.lua, packable), or a string as the time
// its call sent: detail::policy_pairs_of gives the pairs whose remaining digits make the integer
// again and whose resets are the current buckets' ends, or throws ReplyError.
void unpack_policy(const Reply& reply) {
  using std::chrono::microseconds;
  static const std::vector<std::int64_t> limits = {10, 120, 240};
  static const std::vector<microseconds> windows = {microseconds(1'000'000), microseconds(60'000'000),
                                                    microseconds(3'600'000'000)};
  static const std::vector<microseconds> intervals = {microseconds(1'000'000), microseconds(60'000'000),
                                                      microseconds(60'000'000)};
  const bool integer = reply.type == Reply::Type::integer;
  const std::string now = integer ? "1795000000123456" : reply.str;
  const std::int64_t packed = integer ? reply.integer : 12345;
  Reply pairs;
  try {
    pairs = redlimit::detail::policy_pairs_of(packed, limits, windows, intervals, now);
  } catch (const redlimit::ReplyError&) {
    FUZZ_CHECK(!integer || packed < 0 || packed >= 11 * 121 * 241, "a packed admission was refused");
    return;
  }
  FUZZ_CHECK(packed >= 0 && packed < 11 * 121 * 241 && pairs.elements.size() == 6, "a malformed admission was read");
  std::int64_t again = 0, scale = 1;
  for (std::size_t i = 0; i < 3; ++i) {
    const std::int64_t rem = pairs.elements[2 * i].integer, reset = pairs.elements[2 * i + 1].integer;
    FUZZ_CHECK(rem >= 0 && rem <= limits[i], "a remaining past its limit");
    FUZZ_CHECK(reset > 0 && reset <= windows[i].count() + intervals[i].count(), "a reset past the bucket's weight");
    again += rem * scale;
    scale *= limits[i] + 1;
  }
  FUZZ_CHECK(again == packed, "not the packed figures");
  redlimit::detail::decode_decision(pairs, limits, windows);  // the pairs are a policy's admission
}

void decode(const Reply& reply, const std::vector<std::int64_t>& limits) {
  if (reply.type == Reply::Type::integer) return decode_packed(reply, limits);
  redlimit::Decision d;
  if (!decoded(reply, limits, well_formed(reply, limits), d)) return;
  const Reply whole = policy_admission(reply, limits) ? whole_admission(reply) : reply;
  const auto& v = whole.elements;
  const bool short_form = v.size() == 2;  // {remaining, reset_after}
  FUZZ_CHECK(d.allowed == (short_form || v[0].integer == 1), "allowed flag");
  FUZZ_CHECK(d.remaining == v[short_form ? 0 : 1].integer && d.remaining >= 0, "remaining");
  FUZZ_CHECK(d.retry_after.count() == (short_form ? 0 : v[2].integer) && d.retry_after.count() >= 0, "retry_after");
  FUZZ_CHECK(d.reset_after.count() == v[short_form ? 1 : 3].integer && d.reset_after.count() >= 0, "reset_after");
  FUZZ_CHECK(d.delay.count() == (short_form ? 0 : v[4].integer) && d.delay.count() >= 0, "delay");
  const bool policy = v.size() == policy_width(limits);
  const std::size_t index = policy ? static_cast<std::size_t>(v[5].integer - 1) : 0;
  FUZZ_CHECK(d.limit_index == index && index < limits.size(), "limit_index %zu", d.limit_index);
  FUZZ_CHECK(d.limit == limits[index], "limit");
  FUZZ_CHECK(d.limits.size() == (policy ? limits.size() : 0), "per-limit states");
  for (std::size_t i = 0; i < d.limits.size(); ++i) {
    FUZZ_CHECK(d.limits[i].limit == limits[i] && d.limits[i].remaining == v[6 + 2 * i].integer &&
                   d.limits[i].reset_after.count() == v[7 + 2 * i].integer,
               "limit %zu's state", i);
  }
  FUZZ_CHECK(d.source == redlimit::Source::primary && !d.shadow_rejected, "source or shadow flag set");
}

// An admission of a batch of the one limit `limit` as its negative integer e, in the model's own
// words: e = -1 - 2 * remaining (its reset_after the previous decision's: never first), or
// e = -2 - 2 * (reset_after * (limit + 1) + remaining), from -2^53 to -1; as its five integers.
bool negative_admission(std::int64_t e, std::int64_t limit, const std::vector<Reply>& before, Reply& five) {
  const std::int64_t two53 = std::int64_t{1} << 53;
  if (e >= 0 || e < -two53 || limit < 1 || limit >= two53) return false;
  std::int64_t remaining = 0, reset = 0;
  if ((-e) % 2 == 1) {  // -1 - 2r
    if (before.empty()) return false;
    remaining = (-e - 1) / 2;
    reset = before.back().elements[3].integer;
  } else {  // -2 - 2p
    const std::int64_t packed = (-e - 2) / 2;
    remaining = packed % (limit + 1);
    reset = packed / (limit + 1);
  }
  five = Reply::make_array({Reply::make_integer(1), Reply::make_integer(remaining), Reply::make_integer(0),
                            Reply::make_integer(reset), Reply::make_integer(0)});
  return true;
}

// The model of a batch reply (n decisions one after the other): for a policy of several limits, n
// slices of 6 + 2m elements; otherwise each decision one negative integer (negative_admission),
// {3, remaining, reset_after} (allowed, retry and delay 0) or five elements, and nothing after the
// n-th. Each decision, as its five or 6 + 2m integers, goes to `whole`; false when the reply is not
// of that shape or a decision is not well-formed.
bool batch_model(const Reply& reply, std::size_t n, const std::vector<std::int64_t>& limits,
                 std::vector<Reply>& whole) {
  if (reply.type != Reply::Type::array) return false;
  const auto& e = reply.elements;
  const auto slice = [&](std::size_t from, std::size_t len) {
    return Reply::make_array(
        {e.begin() + static_cast<std::ptrdiff_t>(from), e.begin() + static_cast<std::ptrdiff_t>(from + len)});
  };
  std::size_t at = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const bool integer = at < e.size() && e[at].type == Reply::Type::integer;
    if (limits.size() > 1) {  // a policy's: {2, the pairs}, or whole
      const bool tag2 = integer && e[at].integer == 2;
      const std::size_t from = tag2 ? at + 1 : at, len = tag2 ? 2 * limits.size() : policy_width(limits);
      if (e.size() - from < len) return false;
      whole.push_back(slice(from, len));
      if (!well_formed(whole.back(), limits)) return false;
      if (tag2) whole.back() = whole_admission(whole.back());
      at = from + len;
      continue;
    }
    if (integer && e[at].integer < 0) {
      Reply five;
      if (limits.empty() || !negative_admission(e[at].integer, limits[0], whole, five)) return false;
      whole.push_back(five);
      ++at;
      continue;
    }
    const bool tagged = integer && e[at].integer == 3;
    const std::size_t len = tagged ? 3 : 5;
    if (e.size() - at < len) return false;
    if (tagged) {
      for (std::size_t k = at; k < at + len; ++k) {
        if (e[k].type != Reply::Type::integer || e[k].integer < 0) return false;
      }
      whole.push_back(Reply::make_array(
          {Reply::make_integer(1), e[at + 1], Reply::make_integer(0), e[at + 2], Reply::make_integer(0)}));
    } else {
      whole.push_back(slice(at, len));
    }
    if (!well_formed(whole.back(), limits)) return false;
    at += len;
  }
  return at == e.size();
}

// A batch reply: accepted exactly when batch_model() accepts it, and then decoded decision by
// decision as the model expands it.
void decode_batch(const Reply& reply, std::size_t n, const std::vector<std::int64_t>& limits) {
  std::vector<Reply> whole;
  const bool valid = batch_model(reply, n, limits, whole);
  std::vector<redlimit::Decision> ds;
  try {
    ds = redlimit::detail::decode_decisions(reply, n, limits);
  } catch (const redlimit::ReplyError& e) {
    FUZZ_CHECK(!valid, "a well-formed batch reply was rejected: %s", e.what());
    return;
  }
  FUZZ_CHECK(valid, "a malformed batch reply was accepted");
  FUZZ_CHECK(ds.size() == n, "batch size");
  for (std::size_t i = 0; i < n; ++i) {
    const auto& v = whole[i].elements;
    FUZZ_CHECK(ds[i].allowed == (v[0].integer == 1) && ds[i].remaining == v[1].integer &&
                   ds[i].retry_after.count() == v[2].integer && ds[i].reset_after.count() == v[3].integer &&
                   ds[i].delay.count() == v[4].integer && ds[i].limit_index < limits.size() &&
                   (limits.size() < 2 || ds[i].limit_index + 1 == static_cast<std::size_t>(v[5].integer)),
               "batch decision %zu", i);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::vector<std::vector<std::int64_t>> kLimits = {
      {}, {100}, {10, 120, 240}, {1, std::int64_t{1} << 40}, {5, 5, 5, 5, 5, 5, 5}};

  redisReader* reader = redisReaderCreate();
  FUZZ_CHECK(reader != nullptr, "redisReaderCreate");
  if (g_hiredis_fn == nullptr) {
    g_hiredis_fn = reader->fn;
    g_capped_fn = *reader->fn;
    g_capped_fn.createArray = capped_create_array;
  }
  reader->fn = &g_capped_fn;

  if (redisReaderFeed(reader, reinterpret_cast<const char*>(data), size) == REDIS_OK) {
    // Each reply is decoded several times, mostly through exceptions: bound the work per input
    // (a 4 KB input can hold a thousand replies), the fuzzer is better served by more inputs.
    constexpr int kMaxReplies = 16;
    void* raw = nullptr;
    for (int n = 0; n < kMaxReplies && redisReaderGetReply(reader, &raw) == REDIS_OK && raw != nullptr; ++n) {
      const Reply reply = redlimit::detail::from_hiredis(*static_cast<redisReply*>(raw));
      freeReplyObject(raw);
      raw = nullptr;
      for (const auto& limits : kLimits) decode(reply, limits);
      unpack_policy(reply);
      for (std::size_t n : {2, 3}) {
        decode_batch(reply, n, {10, 120, 240});
        decode_batch(reply, n, {100});
      }
      // Wrapped in an array, or in an error, it is never a decision.
      decode(Reply::make_array({reply}), {100});
      if (reply.type == Reply::Type::array) {
        Reply as_error = Reply::make_error(reply.elements.empty() ? "ERR" : "ERR x");
        decode(as_error, {100});
      }
    }
  }
  redisReaderFree(reader);
  return 0;
}

// The twin of lua/epilogue.lua: a call's requests run through a twin's decide(), their writes
// applied and their decisions packed as the script replies (the reply's forms: reply_forms.hpp).
// The lookup of a script by SHA1 and the reading of `now` are script_lookup.cpp's.
#include "memory_scripts.hpp"

#include <algorithm>
#include <optional>
#include <type_traits>
#include <unordered_map>
#include <utility>

#include "reply_forms.hpp"
#include "twins.hpp"

namespace redlimit::detail::memory {

bool blocked_until(const Call& c, std::int64_t until, int width, Decided& d) {
  if (c.refund || until <= c.now) return false;
  d = Decided{};
  d.retry_after = d.reset_after = until - c.now;
  for (int i = 6; i < width; i += 2) {
    d.each.push_back(0);
    d.each.push_back(d.reset_after);
  }
  return true;
}

namespace {

const Packed* packed(const Entry* e) { return e != nullptr ? std::get_if<Packed>(&e->state) : nullptr; }

// What a string state's decide() reads: the state without its block (none for a block alone).
const Packed* stateful(const Packed* v) { return v != nullptr && v->layout != Packed::Layout::none ? v : nullptr; }

// A string state's block, if one holds it now (epilogue.lua: unblock, then the wait).
bool blocked(const Call& c, const Packed* v, int width, Decided& d) {
  return v != nullptr && blocked_until(c, v->blocked_until, width, d);
}

// ARGV[2] is request 1's cost; those of requests 2..n close ARGV, after the head's parameters
// (Call::param_words; a sliding log has 2 or 3), unless they all cost ARGV[2] and none is sent (prologue.lua).
// Each a decimal integer in [1, kMaxCount], as the scripts check it (helpers.lua, integer_in), and
// at most `most`, the least limit of the parameters (helpers.lua, cost_above).
std::int64_t cost_of(const Call& c, std::size_t i, std::size_t n, std::int64_t most) {
  const std::size_t at = i == 0 || c.argc() <= 3 + c.param_words ? 2 : c.argc() - n + i + 1;
  const std::string_view s = c.arg(at).value_or(std::string_view{});
  const std::optional<std::int64_t> v = decimal_in(s, 1, kMaxCount);
  if (!v) throw ScriptError{"ERR a cost (" + std::string(s) + ") is not an integer in [1, 2^40]"};
  if (*v > most) {
    throw ScriptError{"ERR redlimit: a cost of " + std::to_string(*v) + " is above the limit of " +
                      std::to_string(most) + ": no such request can be admitted"};
  }
  return *v;
}

// Every request's cost, read before anything is decided or written (epilogue.lua): a bad one fails
// the call whole, whichever request it belongs to.
std::vector<std::int64_t> costs_of(const Call& c, std::size_t n, std::int64_t most) {
  std::vector<std::int64_t> costs(n);
  for (std::size_t i = 0; i < n; ++i) costs[i] = cost_of(c, i, n, most);
  return costs;
}

// The batch's memo of rejections (epilogue.lua's `rejected`): a rejected request records nothing,
// so until its subject admits something, the same key and cost get the same answer.
class Memo {
 public:
  const Decided* find(const std::string& key, std::int64_t cost) const {
    const auto it = seen_.find(key);
    if (it == seen_.end()) return nullptr;
    for (const auto& [c, d] : it->second) {
      if (c == cost) return &d;
    }
    return nullptr;
  }
  void note(const std::string& key, std::int64_t cost, const Decided& d) {
    if (d.allowed == 0) {
      auto& list = seen_[key];
      for (auto& [c, old] : list) {
        if (c == cost) {
          old = d;
          return;
        }
      }
      list.emplace_back(cost, d);
    } else {
      seen_.erase(key);
    }
  }

 private:
  std::unordered_map<std::string_view, std::vector<std::pair<std::int64_t, Decided>>> seen_;
};

void apply(KeyRef& key, const Write& w, std::int64_t now) {
  // SET KEEPTTL, or SETRANGE over a value of the same length (epilogue.lua, rare_write): the same effect
  if (w.kind == Write::Kind::set && w.ttl_ms == 0) key.set_keep_ttl(w.value);
  if (w.kind == Write::Kind::set && w.ttl_ms != 0) key.set(w.value, now, w.ttl_ms);  // PSETEX
  if (w.kind == Write::Kind::del) key.erase();  // DEL
}

// A blocked request's reset_after (epilogue.lua, blocked_reset): the later of the block's end and
// the state's own, from a peek of the state under the block (record off: nothing is written).
template <class Twin>
void reset_past_block(const Call& c, std::int64_t cost, const Packed* state, Decided& d) {
  Call quiet = c;
  quiet.record = false;
  Write ignored;
  d.reset_after = std::max(d.reset_after, Twin(quiet).decide(cost, state, ignored).reset_after);
}

// A string state, one request: GET state (redis.pcall: another type reads as none, as in a batch),
// the block it holds, decide(), at most one write.
template <class Twin>
Reply one_string(const Twin& twin, const Call& c, const std::string* keys, Tables& tables) {
  const std::int64_t cost = cost_of(c, 0, 1, twin.most_cost());  // before anything is read
  KeyRef state(tables.of(keys[0]), keys[0], c.now);
  const Packed* v = packed(state.get());
  Out out(1, Twin::width(), twin.most_cost());
  Decided d;
  if (blocked(c, v, Twin::width(), d)) {
    reset_past_block<Twin>(c, cost, stateful(v), d);
  } else {
    Write w;
    d = twin.decide(cost, stateful(v), w);
    keep_block(c, v, w);
    apply(state, w, c.now);
  }
  out.add(d);
  return out.done();
}

// A string state, a batch: one MGET of every state, each request decided against the values as the
// batch left them, and each key written once at the end with its last value: the state Redis ends
// with, where epilogue.lua writes each admission as it goes (a string state's decide() cannot fail
// between two writes).
template <class Twin>
Reply batch_strings(const Twin& twin, const Call& c, const std::string* keys, std::size_t n, Tables& tables) {
  struct Slot {
    KeyRef ref;
    const Entry* read;            // what MGET saw (its own kind decides how it reads)
    std::optional<Entry> staged;  // the batch's value once a request wrote it (no state: deleted)
    Write write;
    bool written = false;
  };
  std::vector<Slot> slots;
  slots.reserve(n);
  std::unordered_map<std::string_view, std::size_t> index;
  index.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {  // one key a request: the state, which holds its block
    const std::string& key = keys[i];
    if (index.emplace(key, slots.size()).second) {
      KeyRef ref(tables.of(key), key, c.now);
      const Entry* read = ref.get();
      slots.push_back({ref, read, std::nullopt, {}, false});
    }
  }
  const auto view = [&](const Slot& s) -> const Entry* {
    if (!s.written) return s.read;
    return s.write.kind == Write::Kind::set ? &*s.staged : nullptr;
  };

  Out out(n, Twin::width(), twin.most_cost());
  std::vector<std::size_t> order;
  Memo memo;
  const std::vector<std::int64_t> costs = costs_of(c, n, twin.most_cost());
  for (std::size_t i = 0; i < n; ++i) {
    const std::string& key = keys[i];
    const std::int64_t cost = costs[i];
    const std::size_t k = index[key];
    Slot& s = slots[k];
    const Packed* v = packed(view(s));
    Decided d;
    if (const Decided* seen = memo.find(key, cost)) {
      d = *seen;
    } else if (blocked(c, v, Twin::width(), d)) {
      reset_past_block<Twin>(c, cost, stateful(v), d);
    } else {
      Write w;
      d = twin.decide(cost, stateful(v), w);
      keep_block(c, v, w);
      if (w.kind != Write::Kind::none) {
        if (!s.written) order.push_back(k);
        // Keeping the TTL after a write of this batch that set one keeps that one (epilogue.lua).
        if (w.ttl_ms == 0 && s.written && s.write.kind == Write::Kind::set) w.ttl_ms = s.write.ttl_ms;
        s.written = true;
        s.write = w;
        if (w.kind == Write::Kind::set) s.staged = Entry{w.value, kNoDeadline};
      }
    }
    memo.note(key, cost, d);
    out.add(d);
  }
  for (const std::size_t k : order) apply(slots[k].ref, slots[k].write, c.now);
  return out.done();
}

// A sorted set or a hash: decide() reads and writes the state itself, which holds its block, and
// answers for it. The fixed window runs its own requests (no epilogue: fixed_window.lua), which this
// loop runs alike: each in order, a repeated rejection answered from the memo (the script remembers
// the last one; same answers).
template <class Twin>
Reply run_keyed(Twin& twin, const Call& c, const std::string* keys, std::size_t n, Tables& tables) {
  Out out(n, twin.width(), twin.most_cost());
  if constexpr (std::is_same_v<Twin, PolicyTwin>) out.pack_with(&twin);
  Memo memo;
  const std::vector<std::int64_t> costs = costs_of(c, n, twin.most_cost());
  for (std::size_t i = 0; i < n; ++i) {
    const std::string& key = keys[i];
    const std::int64_t cost = costs[i];
    Decided d;
    if (const Decided* seen = memo.find(key, cost)) {
      d = *seen;
    } else {
      KeyRef state(tables.of(key), key, c.now);
      d = twin.decide(state, cost);
    }
    if (n > 1) memo.note(key, cost, d);
    out.add(d);
  }
  return out.done();
}

template <class Twin>
Reply run_strings(const Twin& twin, const Call& c, const std::string* keys, std::size_t n, Tables& tables) {
  return n == 1 ? one_string(twin, c, keys, tables) : batch_strings(twin, c, keys, n, tables);
}

Reply dispatch(ScriptId id, const Call& c, const std::string* keys, std::size_t n, Tables& tables) {
  switch (id) {
    case ScriptId::fixed_window: {
      FixedWindowTwin twin(c);
      return run_keyed(twin, c, keys, n, tables);
    }
    case ScriptId::token_bucket:
      return run_strings(TokenBucketTwin(c), c, keys, n, tables);
    case ScriptId::leaky_bucket:
      return run_strings(LeakyBucketTwin(c), c, keys, n, tables);
    case ScriptId::sliding_log: {
      SlidingLogTwin twin(c);
      return run_keyed(twin, c, keys, n, tables);
    }
    case ScriptId::policy: {
      PolicyTwin twin(c);
      return run_keyed(twin, c, keys, n, tables);
    }
    case ScriptId::block: {
      KeyRef marker(tables.of(keys[1]), keys[1], c.now);
      KeyRef state(tables.of(keys[0]), keys[0], c.now);
      const auto r = block(c, marker, state);
      Reply reply = Reply::make_array({});
      for (const auto v : r) reply.elements.push_back(Reply::make_integer(v));
      return reply;
    }
  }
  return Reply::make_error("ERR unknown script");
}

}  // namespace

Reply run_script(ScriptId id, const std::string* keys, std::size_t nkeys, const std::vector<std::string_view>& args,
                 std::size_t param_words, std::int64_t now, Tables& tables) {
  try {
    const Call c(args, param_words, now);
    return dispatch(id, c, keys, nkeys / keys_per_request(id), tables);
  } catch (const ScriptError& e) {
    if (e.message.rfind("WRONGTYPE", 0) == 0) return Reply::make_error(e.message);
    return Reply::make_error(e.message + " (in the memory twin of " + std::string(script_name(id)) + ".lua)");
  }
}

}  // namespace redlimit::detail::memory

#include "sentinel_discovery.hpp"

#include <fmt/format.h>

#include <string_view>
#include <thread>
#include <vector>

#include "call_deadline.hpp"
#include "endpoint_text.hpp"
#include "interrupt.hpp"
#include "redlimit/detail/message.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/transport/redis_connection.hpp"
#include "tls.hpp"

namespace redlimit::hiredis_detail {

namespace {

// What one pass learnt, sentinel by sentinel, for the error it may end with.
struct Pass {
  std::vector<std::string> notes;  // one line per sentinel asked
  std::size_t answered = 0;        // sentinels that answered the question (an address or nil)
  std::size_t unknown = 0;         // of those, the ones that know no master of that name
  std::size_t refused = 0;         // sentinels that refused our sentinel credentials
  std::size_t tls_refused = 0;     // of those, the ones whose certificate we refused (rediss-sentinel://)
};

using hiredis_detail::describe;

// An error's text without the "redlimit: connection: " that the whole message starts with anyway.
std::string_view short_what(const std::exception& e) {
  std::string_view what = e.what();
  for (std::string_view prefix : {"redlimit: ", "connection: "}) {
    if (what.substr(0, prefix.size()) == prefix) what.remove_prefix(prefix.size());
  }
  return what;
}

bool refusal(const std::string& error) {
  for (std::string_view code : {"NOAUTH", "WRONGPASS", "NOPERM"}) {
    if (error.compare(0, code.size(), code) == 0) return true;
  }
  return false;
}

struct Timeouts {
  Timeouts(std::chrono::milliseconds connect_timeout, std::chrono::milliseconds command_timeout)
      : connect(sentinel_step(connect_timeout)), command(sentinel_step(command_timeout)) {}
  std::chrono::milliseconds connect, command;
};

// SENTINEL GET-MASTER-ADDR-BY-NAME on one sentinel; true (and host, port) when it named a master.
bool ask_sentinel(const SentinelEndpoint& endpoint, const Endpoint& sentinel, Timeouts t, FoundMaster& found,
                  Pass& pass) {
  Reply r;
  try {
    RedisConnection conn(sentinel, t.connect, t.command);
    r = conn.command({"SENTINEL", "GET-MASTER-ADDR-BY-NAME", endpoint.master_name});
  } catch (const AuthError& e) {
    ++pass.refused;
    if (dynamic_cast<const TlsError*>(&e) != nullptr) ++pass.tls_refused;
    pass.notes.push_back(std::string(short_what(e)));
    return false;
  } catch (const ConnectionError& e) {
    pass.notes.push_back(std::string(short_what(e)));
    return false;
  }
  if (r.is_error()) {
    if (refusal(r.str)) ++pass.refused;
    pass.notes.push_back(fmt::format("{} answered {}", describe(sentinel), detail::printable(r.str)));
    return false;
  }
  ++pass.answered;
  if (r.type == Reply::Type::nil) {
    ++pass.unknown;
    pass.notes.push_back(fmt::format("{}: unknown", describe(sentinel)));
    return false;
  }
  int port = 0;
  if (r.type == Reply::Type::array && r.elements.size() == 2) {
    const std::string& p = r.elements[1].str;
    if (!p.empty() && p.size() <= 5 && p.find_first_not_of("0123456789") == std::string::npos) port = std::stoi(p);
  }
  if (port < 1 || port > 65535 || r.elements[0].str.empty()) {
    pass.notes.push_back(fmt::format("{} answered an address we cannot read", describe(sentinel)));
    return false;
  }
  found.host = r.elements[0].str;
  found.port = port;
  return true;
}

// ROLE on the server a sentinel named, with the data credentials: true when it says "master". The
// master refusing our credentials is an AuthError, thrown (configuration: no other sentinel helps).
bool confirm_master(const SentinelEndpoint& endpoint, const FoundMaster& found, const Endpoint& sentinel, Timeouts t,
                    Pass& pass) {
  Endpoint master = endpoint.master;
  master.host = found.host;
  master.port = found.port;
  Reply role;
  try {
    RedisConnection conn(master, t.connect, t.command);
    role = conn.command({"ROLE"});
  } catch (const AuthError&) {
    throw;
  } catch (const ConnectionError& e) {
    pass.notes.push_back(fmt::format("{} named {}: {}", describe(sentinel), describe(master), short_what(e)));
    return false;
  }
  if (role.type == Reply::Type::array && !role.elements.empty() && role.elements[0].str == "master") return true;
  pass.notes.push_back(fmt::format("{} named {}, whose ROLE is {}", describe(sentinel), describe(master),
                                   role.is_error()         ? detail::printable(role.str)
                                   : role.elements.empty() ? std::string("unknown")
                                                           : detail::printable(role.elements[0].str)));
  return false;
}

[[noreturn]] void missed_master(const SentinelEndpoint& endpoint, const Pass& pass) {
  std::string notes;
  for (const auto& n : pass.notes) notes += (notes.empty() ? "" : "; ") + n;
  const std::string name = detail::printable(endpoint.master_name);
  // Every sentinel answered, and none can help whatever the time: configuration.
  if (pass.unknown + pass.refused == endpoint.sentinels.size()) {
    if (pass.refused == 0) throw AuthError(fmt::format("no sentinel knows a master named \"{}\" ({})", name, notes));
    if (pass.tls_refused == pass.refused && pass.unknown == 0) {
      throw TlsError(fmt::format("every sentinel's certificate was refused ({})", notes));
    }
    throw AuthError(fmt::format("the sentinels refused our sentinel credentials ({})", notes));
  }
  throw ConnectionError(fmt::format("no master \"{}\" confirmed by the sentinels ({})", name, notes));
}

}  // namespace

std::string master_named_by(const SentinelEndpoint& endpoint, std::size_t index,
                            std::chrono::milliseconds connect_timeout, std::chrono::milliseconds command_timeout) {
  if (index >= endpoint.sentinels.size()) return {};
  const NarrowedCall half(half_of_call_left());  // the call's own command needs the rest
  Pass pass;
  FoundMaster found;
  if (!ask_sentinel(endpoint, endpoint.sentinels[index], Timeouts{connect_timeout, command_timeout}, found, pass)) {
    return {};
  }
  return fmt::format("{}:{}", found.host, found.port);
}

FoundMaster find_master(const SentinelEndpoint& endpoint, std::size_t first, std::chrono::milliseconds connect_timeout,
                        std::chrono::milliseconds command_timeout) {
  if (endpoint.sentinels.empty()) throw InvalidArgument("a Sentinel URL needs at least one sentinel");
  const Timeouts t{connect_timeout, command_timeout};
  const std::size_t n = endpoint.sentinels.size();
  Pass pass;
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t index = (first + i) % n;
    const Endpoint& sentinel = endpoint.sentinels[index];
    // Half the call's time left for each sentinel but the last (its answer, and ROLE on the master
    // it names): one that hangs cannot take the whole call, and every search after it.
    const NarrowedCall share(i + 1 < n ? half_of_call_left() : no_deadline());
    FoundMaster found;
    if (!ask_sentinel(endpoint, sentinel, t, found, pass)) continue;
    if (!confirm_master(endpoint, found, sentinel, t, pass)) continue;
    found.sentinel = index;
    return found;
  }
  missed_master(endpoint, pass);
}

FoundMaster find_master_patiently(const SentinelEndpoint& endpoint, std::size_t first,
                                  std::chrono::milliseconds connect_timeout, std::chrono::milliseconds command_timeout,
                                  int rounds, std::chrono::milliseconds pause) {
  for (int round = 1;; ++round) {
    try {
      return find_master(endpoint, first, connect_timeout, command_timeout);
    } catch (const AuthError&) {
      throw;  // configuration: another pass cannot help
    } catch (const ConnectionError&) {
      // (interrupted: the thread's owner is closing, interrupt.hpp; every pass would fail at once.)
      if (round >= rounds || left_in_call(command_timeout) <= pause || interrupted()) throw;
      std::this_thread::sleep_for(pause);
    }
  }
}

bool confirm_announced(const SentinelEndpoint& endpoint, const FoundMaster& announced,
                       std::chrono::milliseconds connect_timeout, std::chrono::milliseconds command_timeout) {
  // Half the call's time left, as each sentinel of a pass gets: an announced master that hangs (a
  // stale or a wrong announcement) leaves the search that follows the rest.
  const NarrowedCall half(half_of_call_left());
  Pass pass;  // its notes name the sentinel; no error is made of them here
  return confirm_master(endpoint, announced, endpoint.sentinels.front(), Timeouts{connect_timeout, command_timeout},
                        pass);
}

void check_sentinel_endpoint(const SentinelEndpoint& endpoint) {
  if (endpoint.sentinels.empty()) throw InvalidArgument("a Sentinel URL needs at least one sentinel");
  if (endpoint.master_name.empty()) throw InvalidArgument("a Sentinel URL needs a master name");
  // (Null, and no work, for an endpoint without TLS.)
  for (const Endpoint& s : endpoint.sentinels) Tls::make(s);
  Tls::make(endpoint.master);
}

}  // namespace redlimit::hiredis_detail

#include "redlimit/detail/script.hpp"

#include <fmt/format.h>

#include "redlimit/detail/sha1.hpp"
#include "redlimit/errors.hpp"

namespace redlimit::detail {

Script::Script(std::string_view script_name, std::string_view script_source)
    : name(script_name), source(script_source), sha1(sha1_hex(script_source)) {}

namespace {

std::vector<std::string> eval_like(std::string verb, std::string_view body, const std::vector<std::string>& keys,
                                   const std::vector<std::string>& args) {
  std::vector<std::string> argv;
  argv.reserve(3 + keys.size() + args.size());
  argv.push_back(std::move(verb));
  argv.emplace_back(body);
  argv.push_back(std::to_string(keys.size()));
  argv.insert(argv.end(), keys.begin(), keys.end());
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

}  // namespace

std::vector<std::string> evalsha_command(const Script& script, const std::vector<std::string>& keys,
                                         const std::vector<std::string>& args) {
  return eval_like("EVALSHA", script.sha1, keys, args);
}

bool is_noscript(const Reply& r) { return r.is_error() && r.str.rfind("NOSCRIPT", 0) == 0; }

Reply run_script(Connection& conn, const Script& script, const std::vector<std::string>& keys,
                 const std::vector<std::string>& args) {
  Reply reply = conn.command(evalsha_command(script, keys, args));
  if (is_noscript(reply)) {
    // The script did not run; EVAL runs it once and caches it for the next EVALSHA.
    reply = conn.command(eval_command(script, keys, args));
  }
  check_script_reply(script, reply);
  return reply;
}

std::vector<std::string> eval_command(const Script& script, const std::vector<std::string>& keys,
                                      const std::vector<std::string>& args) {
  return eval_like("EVAL", script.source, keys, args);
}

void check_script_reply(const Script& script, const Reply& reply) {
  if (reply.is_error()) {
    static constexpr std::string_view kUnavailable[] = {"LOADING",  "BUSY",     "MASTERDOWN", "CLUSTERDOWN",
                                                        "TRYAGAIN", "READONLY", "OOM"};
    for (std::string_view prefix : kUnavailable) {
      if (reply.str.compare(0, prefix.size(), prefix) == 0) {
        throw UnavailableError(fmt::format("script {}: {}", script.name, reply.str));
      }
    }
    throw ReplyError(fmt::format("script {} failed: {}", script.name, reply.str));
  }
}

}  // namespace redlimit::detail

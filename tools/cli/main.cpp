// redlimit: look at and act on the state redlimit keeps in Redis (docs/operations.md).
#include <cstdio>

#include "cli.hpp"

namespace {

int dispatch(const cli::Args& args, cli::Output& out) {
  using Run = int (*)(const cli::Args&, cli::Output&);
  static const std::map<std::string, Run> commands{{"check", cli::run_check},     {"inspect", cli::run_inspect},
                                                   {"reset", cli::run_reset},     {"block", cli::run_block},
                                                   {"unblock", cli::run_unblock}, {"scan", cli::run_scan}};
  const auto it = commands.find(args.command);
  if (it == commands.end()) throw cli::UsageError("unknown command \"" + args.command + "\" (try --help)");
  return it->second(args, out);
}

// One line on stderr: "redlimit: <reason>", the prefix said once (the library's messages carry it).
void say(const std::exception& e) { std::fprintf(stderr, "redlimit: %s\n", cli::reason(e).c_str()); }

}  // namespace

int main(int argc, char** argv) {
  cli::Args args;
  try {
    args = cli::parse_args(argc, argv);
    if (args.help) {
      std::fputs(cli::usage(), stdout);
      return cli::kOk;
    }
    cli::Output out;
    const int code = dispatch(args, out);
    std::fputs(args.json ? (out.json() + "\n").c_str() : out.lines().c_str(), stdout);
    return code;
  } catch (const cli::UsageError& e) {
    say(e);
    return cli::kUsage;
  } catch (const redlimit::InvalidArgument& e) {  // a subject or resource the library refuses
    say(e);
    return cli::kUsage;
  } catch (const redlimit::ConnectionError& e) {  // timeouts and AUTH failures included
    say(e);
    return cli::kConnection;
  } catch (const redlimit::ReplyError& e) {
    say(e);
    // NOAUTH / WRONGPASS: no or a wrong password, a connection problem to the operator.
    const std::string what = e.what();
    const bool auth = what.find("NOAUTH") != std::string::npos || what.find("WRONGPASS") != std::string::npos;
    return auth ? cli::kConnection : cli::kRedis;
  } catch (const std::exception& e) {
    say(e);
    return cli::kRedis;
  }
}

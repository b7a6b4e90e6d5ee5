// SwitchListener: Sentinel's +switch-master announcements, heard on a thread (switch_listener.hpp).
#include "switch_listener.hpp"

#include <poll.h>

#include <sstream>
#include <utility>
#include <vector>

#include "interrupt.hpp"
#include "redlimit/errors.hpp"
#include "redlimit/transport/redis_connection.hpp"
#include "sentinel_discovery.hpp"

namespace redlimit::hiredis_detail {

namespace {

constexpr std::string_view kChannel = "+switch-master";
// After a lost connection or a refusal: the pause before the next sentinel is tried. Long enough
// that sentinels all down cost a connect attempt twice a second, short against a failover's time.
constexpr std::chrono::milliseconds kRetryPause{500};
// A quiet subscription is PINGed this often: a sentinel gone without closing the connection (a
// host down, a cable pulled) shows as a PING unanswered within command_timeout.
constexpr std::chrono::milliseconds kQuietPing{5000};

}  // namespace

struct SwitchListener::State {
  State(SentinelEndpoint e, std::chrono::milliseconds connect, std::chrono::milliseconds command, Heard h)
      : endpoint(std::move(e)),
        connect_timeout(sentinel_step(connect)),
        command_timeout(sentinel_step(command)),
        heard(std::move(h)) {}

  void run();
  bool listen_on(const Endpoint& sentinel);  // false: the sentinel refused SUBSCRIBE
  void handle(const Reply& reply) const;
  void pause() const;
  bool stopped() const { return interrupt.halted(); }

  const SentinelEndpoint endpoint;
  const std::chrono::milliseconds connect_timeout;
  const std::chrono::milliseconds command_timeout;
  const Heard heard;
  // Halted by the destructor: ends whatever the thread waits for (interrupt.hpp), its polls (a
  // message, the pause) through the wake pipe.
  Interrupt interrupt;
};

// Sentinels in turn, from the first; a sentinel that refused SUBSCRIBE or our credentials is not
// asked again, and once all have, nothing is left to listen to.
void SwitchListener::State::run() {
  const std::size_t n = endpoint.sentinels.size();
  std::vector<bool> refused(n, false);
  std::size_t left = n;
  const InterruptScope scope(interrupt);
  for (std::size_t next = 0; !stopped() && left > 0; next = (next + 1) % n) {
    if (refused[next]) continue;
    bool refusal = false;
    try {
      refusal = !listen_on(endpoint.sentinels[next]);
    } catch (const AuthError&) {  // our sentinel credentials (or its certificate) refused: configuration
      refusal = true;
    } catch (const Error&) {  // the connection failed or ended: the next sentinel, after the pause
    }
    if (refusal) {
      refused[next] = true;
      --left;
    }
    if (!stopped()) pause();
  }
}

bool SwitchListener::State::listen_on(const Endpoint& sentinel) {
  struct Forget {  // destroyed after `conn`: the dup outlives the socket it was made of
    Interrupt& interrupt;
    ~Forget() { interrupt.forget_all(); }
  } forget_after{interrupt};
  RedisConnection conn(sentinel, connect_timeout, command_timeout);
  const Reply confirmed = conn.command({"SUBSCRIBE", std::string(kChannel)});
  if (confirmed.is_error()) return false;
  Reply reply;
  while (!stopped()) {
    if (conn.await_push(kQuietPing, reply, interrupt.wake_fd())) {
      handle(reply);
    } else if (!stopped()) {
      handle(conn.command({"PING"}));  // its "pong" is not a message; a message read first is
    }
  }
  return true;
}

// A message: ["message", "+switch-master", "<name> <old ip> <old port> <new ip> <new port>"].
// Anything else read on the subscription (a PING's "pong") is passed over.
void SwitchListener::State::handle(const Reply& reply) const {
  if (reply.type != Reply::Type::array || reply.elements.size() != 3 || reply.elements[0].str != "message" ||
      reply.elements[1].str != kChannel) {
    return;
  }
  std::istringstream words(reply.elements[2].str);
  std::string name, old_host, old_port, host;
  int port = 0;
  if (!(words >> name >> old_host >> old_port >> host >> port) || name != endpoint.master_name || port < 1 ||
      port > 65535) {
    return;
  }
  try {
    heard(host, port);
  } catch (...) {  // the callback's own failure ends nothing here
  }
}

void SwitchListener::State::pause() const {
  pollfd woken{interrupt.wake_fd(), POLLIN, 0};
  ::poll(&woken, 1, static_cast<int>(kRetryPause.count()));
}

SwitchListener::SwitchListener(SentinelEndpoint endpoint, std::chrono::milliseconds connect_timeout,
                               std::chrono::milliseconds command_timeout, Heard heard)
    : state_(std::make_shared<State>(std::move(endpoint), connect_timeout, command_timeout, std::move(heard))) {
  // The thread shares the state: it may outlive this object (see the destructor).
  thread_ = std::thread([state = state_] {
    block_sigpipe_on_this_thread();
    state->run();
  });
}

SwitchListener::~SwitchListener() {
  state_->interrupt.halt();
  if (thread_.get_id() == std::this_thread::get_id()) {
    thread_.detach();  // its callback let the last owner go: the thread ends by itself
  } else {
    thread_.join();
  }
}

}  // namespace redlimit::hiredis_detail

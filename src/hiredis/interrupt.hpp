#pragma once
// Ending another thread's blocking I/O at once, for the threads redlimit runs itself: the Sentinel
// listener (switch_listener.hpp) and an async client's master search (master_watch.hpp). Their
// owner, when it closes, must not wait out a sentinel that never answers: a connect to a host that
// drops SYNs waits for connect_timeout, a hung sentinel's reply for command_timeout.
//
// A thread runs its I/O under an InterruptScope. Each RedisConnection it connects then connects
// with connect_context (tcp_connect.hpp), whose wait also ends when the Interrupt's wake pipe becomes
// readable, and hands its socket to adopt(), which keeps a dup() of it. halt(), from any thread,
// writes the pipe and shuts the reading half of every adopted socket down: any wait for bytes inside
// hiredis or OpenSSL (a TLS handshake, AUTH, a reply) ends as if the server had closed, and a write
// still goes out rather than failing with EPIPE. A dup outlives the connection's own descriptor, so
// halt() never touches a descriptor number that was closed and given to someone else; forget_all()
// closes the dups once the thread's connections are gone. A host name's lookup is waited for on the
// wake pipe too (name_lookup.hpp); a unix socket's connect is not interrupted.
#include <atomic>
#include <mutex>
#include <vector>

namespace redlimit::hiredis_detail {

class Interrupt {
 public:
  Interrupt();  // the wake pipe; throws Error when none can be made
  ~Interrupt();
  Interrupt(const Interrupt&) = delete;
  Interrupt& operator=(const Interrupt&) = delete;

  // Any thread; for good: every wait of the connections made under this interrupt ends, now and
  // later, and a new connect fails.
  void halt();
  bool halted() const { return halted_.load(); }
  // Readable once halted: a poll of the interrupted thread waits on it too.
  int wake_fd() const { return wake_[0]; }

  // The interrupted thread (RedisConnection::context): a new connected socket; false when halted
  // (the connect then fails). Without a dup (no descriptor left) the socket is kept going; only
  // halt() may then wait for it.
  bool adopt(int fd);
  // The interrupted thread, once the connections it made are closed: the dups are closed too.
  void forget_all();

 private:
  std::atomic<bool> halted_{false};
  int wake_[2] = {-1, -1};
  std::mutex mutex_;       // adopt() and halt(): one of them sees the other's work
  std::vector<int> dups_;  // one per adopted socket
};

// The calling thread's I/O runs under `interrupt` for the scope's life (scopes do not nest).
class InterruptScope {
 public:
  explicit InterruptScope(Interrupt& interrupt);
  ~InterruptScope();
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;
};

// The calling thread's interrupt (InterruptScope), or null.
Interrupt* current_interrupt();
// True when the calling thread runs under an interrupt that has been halted: a loop that would
// try again (discovery's passes) stops instead.
bool interrupted();

// For a thread of ours that talks to servers (the listener's, a search's), at its start: a write to
// a server that has just closed fails with EPIPE instead of raising SIGPIPE, which would end a
// process that does not ignore it (docs/api.md asks it to, for hiredis's sake; our threads do not
// rely on that). A SIGPIPE left pending ends with the thread.
void block_sigpipe_on_this_thread();

}  // namespace redlimit::hiredis_detail

// See interrupt.hpp.
#include "interrupt.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>

#include "redlimit/errors.hpp"

namespace redlimit::hiredis_detail {

namespace {
thread_local Interrupt* t_interrupt = nullptr;
}  // namespace

Interrupt::Interrupt() {
  if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) throw Error("cannot make a pipe to interrupt a thread's I/O");
}

Interrupt::~Interrupt() {
  forget_all();
  ::close(wake_[0]);
  ::close(wake_[1]);
}

void Interrupt::halt() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    halted_ = true;
    for (const int fd : dups_) ::shutdown(fd, SHUT_RD);
  }
  const char byte = 0;
  if (::write(wake_[1], &byte, 1) < 0) {
    // A full pipe is readable already.
  }
}

bool Interrupt::adopt(int fd) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (halted_) return false;
  const int dup = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (dup >= 0) dups_.push_back(dup);
  return true;
}

void Interrupt::forget_all() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const int fd : dups_) ::close(fd);
  dups_.clear();
}

InterruptScope::InterruptScope(Interrupt& interrupt) { t_interrupt = &interrupt; }
InterruptScope::~InterruptScope() { t_interrupt = nullptr; }

Interrupt* current_interrupt() { return t_interrupt; }

bool interrupted() { return t_interrupt != nullptr && t_interrupt->halted(); }

void block_sigpipe_on_this_thread() {
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
}

}  // namespace redlimit::hiredis_detail

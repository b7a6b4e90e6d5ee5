#pragma once
// One exception tree for everything redlimit throws. Catch redlimit::Error for "anything from the
// limiter"; catch the leaves to tell a caller mistake (InvalidArgument) from an outage
// (ConnectionError, TimeoutError) from a server that answered something unexpected (ReplyError).
#include <stdexcept>
#include <string>

namespace redlimit {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error("redlimit: " + what) {}
};

// Bad input detected before any I/O: nothing was sent to Redis and nothing was recorded.
class InvalidArgument : public Error {
 public:
  explicit InvalidArgument(const std::string& what) : Error("invalid argument: " + what) {}
};

// The server could not be reached or the connection broke. When thrown from a decision call the
// outcome is unknown: the script may or may not have run, so it is never replayed automatically.
class ConnectionError : public Error {
 public:
  explicit ConnectionError(const std::string& what) : Error("connection: " + what) {}

 protected:
  struct Raw {};
  ConnectionError(Raw, const std::string& what) : Error(what) {}
};

// A connect or command deadline passed.
class TimeoutError : public ConnectionError {
 public:
  explicit TimeoutError(const std::string& what) : ConnectionError(Raw{}, "timeout: " + what) {}
};

// The server was reached but refused this client's AUTH or SELECT (wrong credentials, a database it
// does not have), or, on redis-sentinel://, no sentinel knows the master's name or every sentinel
// refused our sentinel credentials: a configuration error, thrown by connect() whatever the failure
// policy.
class AuthError : public ConnectionError {
 public:
  explicit AuthError(const std::string& what) : ConnectionError(what) {}
};

// TLS (rediss://): the server's certificate was refused (signed by a CA we do not trust, expired, or
// naming another host). Configuration, like AuthError, so connect() throws it whatever the failure
// policy; docs/connecting.md lists the messages.
class TlsError : public AuthError {
 public:
  explicit TlsError(const std::string& what) : AuthError("TLS: " + what) {}
};

// Redis answered with an error reply, or with a reply whose shape we do not expect.
class ReplyError : public Error {
 public:
  explicit ReplyError(const std::string& what) : Error("reply: " + what) {}
};

// Redis answered but cannot serve now: the server is loading, busy, out of memory, without enough
// replicas, refusing clients, or the command was not allowed (detail::is_outage_reply lists every
// reply; docs/reliability.md has the table). Handled by the failure policy like a ConnectionError;
// the script did not run.
class UnavailableError : public ReplyError {
 public:
  explicit UnavailableError(const std::string& what) : ReplyError(what) {}
};

}  // namespace redlimit

#pragma once
// TLS for the hiredis transports (rediss://): one OpenSSL client context per endpoint, shared by
// every connection made to it (the pool's, the async client's, a cluster's nodes), and the start of
// TLS on a connected hiredis context.
//
// Why our own SSL_CTX and not hiredis's redisCreateSSLContext: hiredis sets SNI but never checks
// the server's name against its certificate, so any certificate the CA signed would be accepted
// for any server. We verify the name (SSL_set1_host, or the IP address for an IP host) on every
// connection, and hand hiredis the SSL object (redisInitiateSSL).
//
// Only with REDLIMIT_HAVE_TLS (hiredis >= 1.0 with hiredis_ssl, and OpenSSL); without it, make()
// throws InvalidArgument for a rediss:// endpoint, before any I/O.
#include <memory>
#include <string>

#include "redlimit/url.hpp"

struct redisContext;

namespace redlimit::hiredis_detail {

class Tls {
 public:
  // Null for an endpoint without TLS. Throws InvalidArgument when this build has no TLS, or a file
  // named by the options cannot be loaded (the message names the file and OpenSSL's reason).
  static std::shared_ptr<const Tls> make(const Endpoint& endpoint);

  ~Tls();
  Tls(const Tls&) = delete;
  Tls& operator=(const Tls&) = delete;

  // Starts TLS on a connected context (blocking: a handshake; non-blocking: hiredis finishes it as
  // the socket becomes ready). On failure returns false with c.err / c.errstr set by hiredis, or
  // by us when the SSL object could not be made.
  bool start(redisContext& c) const;

 private:
  struct State;
  explicit Tls(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace redlimit::hiredis_detail

#pragma once
// TLS for the hiredis transports (rediss://): one OpenSSL client context per endpoint, shared by
// every connection made to it (a pool's connections), and the start of TLS on a connected hiredis
// context.
//
// Why our own SSL_CTX and not hiredis's redisSSLContext (redisCreateSSLContextWithOptions +
// redisInitiateSSLWithContext): hiredis 1.2 sets SNI but never checks the server's name against its
// certificate, so any certificate the CA signed would be accepted for any server; and its context
// is opaque, so the check cannot be added to it. We verify the name (X509_VERIFY_PARAM_set1_host,
// or the IP address for an IP host) on every connection and hand hiredis the SSL object
// (redisInitiateSSL). Both OpenSSL objects are owned by RAII holders, as every hiredis object is.
//
// Only with REDLIMIT_HAVE_TLS (hiredis >= 1.0 with hiredis_ssl, and OpenSSL); without it, make()
// throws InvalidArgument for a rediss:// endpoint, before any I/O.
#include <memory>
#include <string>

#include "redlimit/url.hpp"

struct redisContext;
struct ssl_st;

namespace redlimit::hiredis_detail {

class Tls {
 public:
  // Null for an endpoint without TLS. Throws InvalidArgument when this build has no TLS, or a file
  // named by the options cannot be loaded (the message names the file and OpenSSL's reason).
  static std::shared_ptr<const Tls> make(const Endpoint& endpoint);

  ~Tls();
  Tls(const Tls&) = delete;
  Tls& operator=(const Tls&) = delete;

  enum class Start {
    ok,
    failed,   // c.err / c.errstr say why (a broken connection, a timeout, an alert from the server)
    refused,  // the server's certificate failed verification: `why` says which check
  };
  // Starts TLS on a context. A blocking, connected one: the handshake, bounded by its socket
  // timeout. A non-blocking one (the async client's): only begun, hiredis finishes it as the socket
  // becomes ready, and a refusal shows later as a broken connection: refusal(*ssl) then says why.
  // `ssl` (if given) receives the SSL object on success; hiredis owns it, and frees it with `c`.
  Start start(redisContext& c, std::string& why, ssl_st** ssl = nullptr) const;

  // Why verification refused the server's certificate on `ssl`, or "" if it did not.
  static std::string refusal(const ssl_st& ssl);

  // OpenSSL's reason for the last error of this thread ("tlsv13 alert certificate required"),
  // or "" when there is none; clears the queue. Used to explain a failed read or write: hiredis
  // reports those as plain I/O errors.
  static std::string last_error();

 private:
  struct State;
  explicit Tls(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace redlimit::hiredis_detail

#include "tls.hpp"

#include <fmt/format.h>

#include "redlimit/detail/message.hpp"
#include "redlimit/errors.hpp"

#ifdef REDLIMIT_HAVE_TLS
#include <arpa/inet.h>
#include <hiredis/hiredis.h>
#include <hiredis/hiredis_ssl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <cstdio>
#include <mutex>
#endif

namespace redlimit::hiredis_detail {

#ifdef REDLIMIT_HAVE_TLS

namespace {

struct CtxDeleter {
  void operator()(SSL_CTX* c) const { SSL_CTX_free(c); }
};
struct SslDeleter {
  void operator()(SSL* s) const { SSL_free(s); }
};

// OpenSSL's reason for the last error on this thread, and the queue cleared.
std::string openssl_reason() {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "no reason given";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

[[noreturn]] void bad_file(const char* what, const std::string& path) {
  throw InvalidArgument(
      detail::message("TLS: cannot load the {} \"{}\": {}", what, detail::printable(path), openssl_reason()));
}

bool is_ip_address(const std::string& host) {
  unsigned char buf[16];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

}  // namespace

struct Tls::State {
  std::unique_ptr<SSL_CTX, CtxDeleter> ctx;
  std::string name;  // what the certificate must name: server_name, else the host
  bool name_is_ip = false;
  bool verify = true;
};

std::shared_ptr<const Tls> Tls::make(const Endpoint& endpoint) {
  const TlsOptions& o = endpoint.tls;
  if (!o.enabled) return nullptr;
  static std::once_flag init;
  std::call_once(init, [] { redisInitOpenSSL(); });
  auto state = std::make_unique<State>();
  state->ctx.reset(SSL_CTX_new(TLS_client_method()));
  if (!state->ctx) throw Error("TLS: cannot create an OpenSSL context: " + openssl_reason());
  SSL_CTX* ctx = state->ctx.get();
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  state->verify = !o.insecure_skip_verify;
  SSL_CTX_set_verify(ctx, state->verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, nullptr);
  if (!o.ca_file.empty() || !o.ca_dir.empty()) {
    if (SSL_CTX_load_verify_locations(ctx, o.ca_file.empty() ? nullptr : o.ca_file.c_str(),
                                      o.ca_dir.empty() ? nullptr : o.ca_dir.c_str()) != 1) {
      bad_file(o.ca_file.empty() ? "CA directory" : "CA file", o.ca_file.empty() ? o.ca_dir : o.ca_file);
    }
  } else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
    throw InvalidArgument("TLS: cannot load the system's CA certificates: " + openssl_reason());
  }
  if (!o.cert_file.empty()) {
    if (SSL_CTX_use_certificate_chain_file(ctx, o.cert_file.c_str()) != 1) bad_file("client certificate", o.cert_file);
    if (SSL_CTX_use_PrivateKey_file(ctx, o.key_file.c_str(), SSL_FILETYPE_PEM) != 1) bad_file("private key", o.key_file);
    if (SSL_CTX_check_private_key(ctx) != 1) {
      throw InvalidArgument(detail::message("TLS: the private key \"{}\" does not match the certificate \"{}\"",
                                            detail::printable(o.key_file), detail::printable(o.cert_file)));
    }
  }
  state->name = o.server_name.empty() ? endpoint.host : o.server_name;
  state->name_is_ip = is_ip_address(state->name);
  return std::shared_ptr<const Tls>(new Tls(std::move(state)));
}

bool Tls::start(redisContext& c) const {
  std::unique_ptr<SSL, SslDeleter> ssl(SSL_new(state_->ctx.get()));
  const char* failed = nullptr;
  if (!ssl) {
    failed = "cannot create an SSL object";
  } else if (!state_->name_is_ip && !state_->name.empty() && SSL_set_tlsext_host_name(ssl.get(), state_->name.c_str()) != 1) {
    failed = "cannot set the server name (SNI)";
  } else if (state_->verify && !state_->name.empty()) {
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl.get());
    const int ok = state_->name_is_ip ? X509_VERIFY_PARAM_set1_ip_asc(param, state_->name.c_str())
                                      : X509_VERIFY_PARAM_set1_host(param, state_->name.c_str(), 0);
    if (ok != 1) failed = "cannot set the name to verify";
  }
  if (failed != nullptr) {
    c.err = REDIS_ERR_OTHER;
    std::snprintf(c.errstr, sizeof c.errstr, "TLS: %s", failed);
    return false;
  }
  if (redisInitiateSSL(&c, ssl.get()) != REDIS_OK) {
    // hiredis keeps the SSL object only on success. Its message for a failed verification is
    // OpenSSL's "certificate verify failed"; say which check failed.
    const long verify = SSL_get_verify_result(ssl.get());
    if (verify != X509_V_OK) {
      std::snprintf(c.errstr, sizeof c.errstr, "TLS: the server's certificate was refused: %s",
                    X509_verify_cert_error_string(verify));
    }
    ERR_clear_error();
    return false;
  }
  (void)ssl.release();  // hiredis frees it with the context
  return true;
}

#else  // no TLS in this build

struct Tls::State {};

std::shared_ptr<const Tls> Tls::make(const Endpoint& endpoint) {
  if (!endpoint.tls.enabled) return nullptr;
  throw InvalidArgument(
      "TLS (rediss://) needs redlimit built on hiredis >= 1.0 with hiredis_ssl; this one was built on hiredis "
      "without TLS (see docs/api.md, \"TLS\")");
}

bool Tls::start(redisContext& /*c*/) const { return false; }

#endif

Tls::Tls(std::unique_ptr<State> state) : state_(std::move(state)) {}
Tls::~Tls() = default;

}  // namespace redlimit::hiredis_detail

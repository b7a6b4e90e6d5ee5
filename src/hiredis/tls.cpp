#include "tls.hpp"

#include "redlimit/detail/message.hpp"
#include "redlimit/errors.hpp"

#ifdef REDLIMIT_HAVE_TLS
#include <arpa/inet.h>
#include <hiredis/hiredis.h>
#include <hiredis/hiredis_ssl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

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

std::string reason_or(const char* fallback) {
  std::string r = Tls::last_error();
  return r.empty() ? fallback : r;
}

[[noreturn]] void bad_file(const char* what, const std::string& path) {
  throw InvalidArgument(detail::message("TLS: cannot load the {} \"{}\": {}", what, detail::printable(path),
                                        reason_or("no reason given")));
}

bool is_ip_address(const std::string& host) {
  unsigned char buf[16];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

// The trusted CAs: the files the options name, else the system's.
void load_cas(SSL_CTX* ctx, const TlsOptions& o) {
  if (o.ca_file.empty() && o.ca_dir.empty()) {
    if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
      throw InvalidArgument("TLS: cannot load the system's CA certificates: " + reason_or("no reason given"));
    }
    return;
  }
  // OpenSSL reads a CA directory lazily, at the first verification: a wrong path would only show as
  // "unable to get local issuer certificate" on every connection. Say so now instead.
  struct stat st {};
  if (!o.ca_dir.empty() && (::stat(o.ca_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))) {
    throw InvalidArgument(
        detail::message("TLS: cannot load the CA directory \"{}\": not a directory", detail::printable(o.ca_dir)));
  }
  if (SSL_CTX_load_verify_locations(ctx, o.ca_file.empty() ? nullptr : o.ca_file.c_str(),
                                    o.ca_dir.empty() ? nullptr : o.ca_dir.c_str()) != 1) {
    bad_file(o.ca_file.empty() ? "CA directory" : "CA file", o.ca_file.empty() ? o.ca_dir : o.ca_file);
  }
}

// Mutual TLS: the client's certificate chain and its key (the parser makes sure both or neither).
void load_client_certificate(SSL_CTX* ctx, const TlsOptions& o) {
  if (o.cert_file.empty()) return;
  if (SSL_CTX_use_certificate_chain_file(ctx, o.cert_file.c_str()) != 1) bad_file("client certificate", o.cert_file);
  if (SSL_CTX_use_PrivateKey_file(ctx, o.key_file.c_str(), SSL_FILETYPE_PEM) != 1) bad_file("private key", o.key_file);
  if (SSL_CTX_check_private_key(ctx) != 1) {
    ERR_clear_error();
    throw InvalidArgument(detail::message("TLS: the private key \"{}\" does not match the certificate \"{}\"",
                                          detail::printable(o.key_file), detail::printable(o.cert_file)));
  }
}

}  // namespace

struct Tls::State {
  std::unique_ptr<SSL_CTX, CtxDeleter> ctx;
  std::string name;  // what the certificate must name: server_name, else the host
  bool name_is_ip = false;
  bool verify = true;
};

std::string Tls::last_error() {
  const unsigned long e = ERR_peek_last_error();
  ERR_clear_error();
  if (e == 0) return {};
  const char* reason = ERR_reason_error_string(e);
  return reason != nullptr ? reason : "OpenSSL error " + std::to_string(e);
}

std::shared_ptr<const Tls> Tls::make(const Endpoint& endpoint) {
  const TlsOptions& o = endpoint.tls;
  if (!o.enabled) return nullptr;
  static std::once_flag init;
  std::call_once(init, [] { redisInitOpenSSL(); });
  auto state = std::make_unique<State>();
  state->ctx.reset(SSL_CTX_new(TLS_client_method()));
  if (!state->ctx) throw Error("TLS: cannot create an OpenSSL context: " + reason_or("no reason given"));
  SSL_CTX* ctx = state->ctx.get();
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  state->verify = !o.insecure_skip_verify;
  SSL_CTX_set_verify(ctx, state->verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, nullptr);
  if (state->verify) load_cas(ctx, o);
  load_client_certificate(ctx, o);
  state->name = o.server_name.empty() ? endpoint.host : o.server_name;
  state->name_is_ip = is_ip_address(state->name);
  return std::shared_ptr<const Tls>(new Tls(std::move(state)));
}

std::string Tls::refusal(const ssl_st& ssl) {
  const long verify = SSL_get_verify_result(&ssl);
  if (verify == X509_V_OK) return {};
  return detail::message("the server's certificate was refused: {}", X509_verify_cert_error_string(verify));
}

Tls::Start Tls::start(redisContext& c, std::string& why, ssl_st** started) const {
  std::unique_ptr<SSL, SslDeleter> ssl(SSL_new(state_->ctx.get()));
  if (!ssl) {
    why = "cannot create an SSL object: " + reason_or("no reason given");
    return Start::failed;
  }
  // SNI names a host, never an address (RFC 6066).
  if (!state_->name_is_ip && SSL_set_tlsext_host_name(ssl.get(), state_->name.c_str()) != 1) {
    why = "cannot set the server name (SNI): " + reason_or("no reason given");
    return Start::failed;
  }
  if (state_->verify) {
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl.get());
    const int ok = state_->name_is_ip ? X509_VERIFY_PARAM_set1_ip_asc(param, state_->name.c_str())
                                      : X509_VERIFY_PARAM_set1_host(param, state_->name.c_str(), 0);
    if (ok != 1) {
      why = "cannot set the name to verify: " + reason_or("no reason given");
      return Start::failed;
    }
  }
  if (redisInitiateSSL(&c, ssl.get()) == REDIS_OK) {
    if (started != nullptr) *started = ssl.get();
    (void)ssl.release();  // hiredis owns it now, and frees it with the context
    return Start::ok;
  }
  // On failure hiredis leaves the SSL object to us. Its message for a refused certificate is
  // OpenSSL's bare "certificate verify failed": say which check failed.
  const long verify = SSL_get_verify_result(ssl.get());
  ERR_clear_error();
  if (state_->verify && verify != X509_V_OK) {
    why = detail::message("the server's certificate was refused: {} (verified against {})",
                          X509_verify_cert_error_string(verify), detail::printable(state_->name));
    return Start::refused;
  }
  why = c.errstr;
  return Start::failed;
}

#else  // no TLS in this build

struct Tls::State {};

std::shared_ptr<const Tls> Tls::make(const Endpoint& endpoint) {
  if (!endpoint.tls.enabled) return nullptr;
  throw InvalidArgument(
      "TLS (rediss://) is not supported by this hiredis build: redlimit needs hiredis >= 1.0 with hiredis_ssl "
      "(docs/connecting.md)");
}

Tls::Start Tls::start(redisContext& /*c*/, std::string& why, ssl_st** /*started*/) const {
  why = "no TLS in this build";
  return Start::failed;
}

std::string Tls::refusal(const ssl_st& /*ssl*/) { return {}; }

std::string Tls::last_error() { return {}; }

#endif

Tls::Tls(std::unique_ptr<State> state) : state_(std::move(state)) {}
Tls::~Tls() = default;

}  // namespace redlimit::hiredis_detail

#pragma once
// Bodies of redlimit/url.hpp, part 2: redact_url, what a URL looks like in a message (errors, logs,
// metrics), and the query parameters the parsers take (url-inl.hpp, which includes this file). Apart
// because hiding a secret in a URL that failed to parse is a problem of its own: the URL is read as
// loosely as any reading that could hold one.
#include <algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "redlimit/detail/config.hpp"
#include "redlimit/detail/message.hpp"
#include "redlimit/url.hpp"

namespace redlimit {

namespace url_impl {

// The query parameters the URL parsers take (parse_url, parse_sentinel_url, parse_cluster_url).
REDLIMIT_INLINE bool known_parameter(std::string_view name) {
  static constexpr std::string_view kNames[] = {
      "db",           "user",          "username",          "password",        "password_env",
      "tls_ca_file",  "tls_ca_dir",    "tls_cert_file",     "tls_key_file",    "tls_server_name",
      "tls_insecure_skip_verify",      "sentinel_check_ms", "sentinel_user",   "sentinel_username",
      "sentinel_password",             "sentinel_password_env"};
  for (std::string_view known : kNames) {
    if (name == known) return true;
  }
  return false;
}

// A query key whose value is hidden in messages: password= and sentinel_password=, and any key the
// parsers do not take, so that a misspelled or differently cased one (pasword=, Password=,
// SENTINEL_PASSWORD=), which the parser refuses and quotes the URL for, keeps its value hidden too.
REDLIMIT_INLINE bool secret_key(std::string_view name) {
  return name == "password" || name == "sentinel_password" || !known_parameter(name);
}

// True when every '&'-separated part of `rest` is name=value with a name the parsers take.
REDLIMIT_INLINE bool known_parameters(std::string_view rest) {
  while (true) {
    const std::size_t amp = rest.find('&');
    const std::string_view part = rest.substr(0, amp);
    const std::size_t eq = part.find('=');
    if (eq == std::string_view::npos || !known_parameter(part.substr(0, eq))) return false;
    if (amp == std::string_view::npos) return true;
    rest.remove_prefix(amp + 1);
  }
}

// Where the value of a secret key that starts at `from` ends. A raw '&' may be part of a
// password (connecting.md asks for %26, not every user reads it), so the value runs to the first
// '&' after which the rest of the query is parameters the parsers take, or else to the end of the
// query: a tail that is no such parameter ("Tr0ub&dor", "s3cr&t&tls_ca_file=...") stays hidden.
REDLIMIT_INLINE std::size_t secret_end(std::string_view url, std::size_t from) {
  for (std::size_t amp = url.find('&', from); amp != std::string_view::npos; amp = url.find('&', amp + 1)) {
    if (known_parameters(url.substr(amp + 1))) return amp;
  }
  return url.size();
}

using Span = std::pair<std::size_t, std::size_t>;  // [first, second) of a URL

// The values of the secret keys of the query (after the first '?').
REDLIMIT_INLINE std::vector<Span> query_secrets(std::string_view url) {
  std::vector<Span> out;
  const std::size_t q = url.find('?');
  if (q == std::string_view::npos) return out;
  std::size_t pos = q + 1;
  while (pos <= url.size()) {
    const std::size_t amp = std::min(url.find('&', pos), url.size());
    const std::size_t eq = url.substr(pos, amp - pos).find('=');
    std::size_t next = amp;
    if (eq != std::string_view::npos && secret_key(url.substr(pos, eq))) {
      const std::size_t value = pos + eq + 1;
      next = secret_end(url, value);
      out.emplace_back(value, next);
    }
    pos = next + 1;
  }
  return out;
}

// The password of the userinfo (all of it when there is no user): up to the last '@', so that even
// an unescaped '@', '/' or '?' inside a password stays hidden. Found in the URL as written, not after
// the query's values are hidden: an '@' after the '?' may end a userinfo whose password holds a raw
// '?' ("redis://:a?pass=b@host"), so a URL whose query holds a raw '@' loses more than its password
// here, never less.
REDLIMIT_INLINE std::vector<Span> userinfo_secret(std::string_view url) {
  const std::size_t start = url.find("://");
  const std::size_t at = url.rfind('@');
  if (start == std::string_view::npos || at == std::string_view::npos || at <= start + 3) return {};
  const std::size_t colon = url.find(':', start + 3);
  return {{(colon != std::string_view::npos && colon < at) ? colon + 1 : start + 3, at}};
}

// `url` with each span (merged where they overlap or touch) replaced by "***".
REDLIMIT_INLINE std::string hide(std::string_view url, std::vector<Span> spans) {
  std::sort(spans.begin(), spans.end());
  std::string out;
  std::size_t copied = 0;
  for (std::size_t i = 0; i < spans.size();) {
    const std::size_t first = spans[i].first;
    std::size_t last = spans[i].second;
    for (++i; i < spans.size() && spans[i].first <= last; ++i) last = std::max(last, spans[i].second);
    out.append(url.substr(copied, first - copied)).append("***");
    copied = last;
  }
  return out.append(url.substr(copied));
}

}  // namespace url_impl

REDLIMIT_INLINE std::string redact_url(std::string_view url) {
  // It quotes URLs that failed to parse as well as good ones, so it reads them as loosely as any
  // reading that could hold a secret: both the userinfo and the query are looked at.
  std::vector<url_impl::Span> spans = url_impl::query_secrets(url);
  for (const auto& span : url_impl::userinfo_secret(url)) spans.push_back(span);
  return detail::printable(url_impl::hide(url, std::move(spans)));
}

}  // namespace redlimit

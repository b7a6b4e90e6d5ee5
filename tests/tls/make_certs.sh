#!/usr/bin/env bash
# Certificates for the TLS tests (tests/tls/tls_test.cpp), made fresh in DIR on every run:
#
#   make_certs.sh DIR
#
#   ca.{crt,key}            the test CA, trusted by the tests' clients and the servers
#   other-ca.crt            a second CA that signed nothing we serve ("wrong CA")
#   server.{crt,key}        signed by ca, for 127.0.0.1, ::1 and localhost
#   expired.{crt,key}       signed by ca, for the same names, expired a day ago (x509 -days -1:
#                           notAfter before notBefore is what OpenSSL 3.0 offers without faketime;
#                           the verifier reports it as expired)
#   dnsonly.{crt,key}       signed by ca, for localhost only: no IP address in it
#   client.{crt,key}        signed by ca, a client certificate (mutual TLS)
#
# EC P-256 keys: quick to make, and what managed services commonly use. Nothing secret: the keys
# live in DIR only for one test run.
set -euo pipefail
dir="$1"
mkdir -p "$dir"
cd "$dir"

key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

# NAME CN DAYS EXTENSIONS: a certificate NAME.crt for NAME.key, signed by ca.
sign() {
  local name="$1" cn="$2" days="$3" ext="$4"
  key "$name.key"
  openssl req -new -key "$name.key" -subj "/CN=$cn" -out "$name.csr" 2>/dev/null
  printf '%s\n' "$ext" >"$name.ext"
  openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days "$days" \
    -extfile "$name.ext" -out "$name.crt" 2>/dev/null
  rm -f "$name.csr" "$name.ext"
}

key ca.key
openssl req -x509 -new -key ca.key -subj "/CN=redlimit test CA" -days 2 -out ca.crt 2>/dev/null
key other-ca.key
openssl req -x509 -new -key other-ca.key -subj "/CN=redlimit other CA" -days 2 -out other-ca.crt 2>/dev/null
rm -f other-ca.key

server_ext="basicConstraints=CA:FALSE
keyUsage=digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost"
sign server localhost 2 "$server_ext"
sign expired localhost -1 "$server_ext"
sign dnsonly localhost 2 "${server_ext%%subjectAltName=*}subjectAltName=DNS:localhost"
sign client redlimit-client 2 "basicConstraints=CA:FALSE
keyUsage=digitalSignature
extendedKeyUsage=clientAuth"

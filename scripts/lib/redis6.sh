# shellcheck shell=bash
# Redis 6.0 for the plain pass's integration_redis6 entry: Debian 11's redis-server (6.0.16) and the
# libraries Debian 12 does not have for it (OpenSSL 1.1, Lua 5.1 and its cjson and bitop modules),
# unpacked with extra_debs (scripts/lib/extra_debs.sh) into DEST/root. Sourced by scripts/test.sh.
#
#   source scripts/lib/extra_debs.sh scripts/lib/redis6.sh
#   redis6_server DEST     # fetches once; prints DEST/redis-server
#
# DEST/redis-server is a wrapper that runs the unpacked binary with LD_LIBRARY_PATH pointing at those
# libraries; it execs, so the pid a test starts is the server's own.

redis6_server() {
  local dest="$1"
  extra_debs test.sh "$dest" bullseye redis-server redis-tools libssl1.1 liblua5.1-0 lua-cjson lua-bitop >&2 ||
    return 1
  cat >"$dest/redis-server" <<WRAPPER
#!/bin/sh
# Written by scripts/lib/redis6.sh: Debian 11's redis-server with its libraries.
LD_LIBRARY_PATH="$dest/root/usr/lib/x86_64-linux-gnu\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "$dest/root/usr/bin/redis-server" "\$@"
WRAPPER
  chmod +x "$dest/redis-server"
  echo "$dest/redis-server"
}

# shellcheck shell=bash
# Installs missing Debian packages; sourced by scripts/test.sh and scripts/fuzz.sh.
#
#   source scripts/lib/install.sh
#   install_missing NAME INSTALL PACKAGE...
#
# NAME prefixes the messages (the calling script's name). With INSTALL=1 the missing packages are
# installed with apt-get, after an `apt-get update` (a fresh Debian 12 has no package lists), as
# root or through sudo. With INSTALL=0 a missing package is an error. On a system without dpkg it
# only warns: the caller's build then says what is missing.

# True if the Debian package $1 is installed.
package_installed() {
  dpkg -s "$1" 2>/dev/null | grep -q '^Status: install ok installed'
}

install_missing() {
  local name="$1" install="$2"
  shift 2
  if ! command -v dpkg >/dev/null 2>&1; then
    echo "$name: not a Debian system (no dpkg): make sure $* (or their equivalents) are installed" >&2
    return 0
  fi
  local missing=() p
  for p in "$@"; do
    package_installed "$p" || missing+=("$p")
  done
  [[ ${#missing[@]} -eq 0 ]] && return 0
  if [[ "$install" -eq 0 ]]; then
    echo "$name: missing packages: ${missing[*]} (and --no-install was given)" >&2
    exit 1
  fi
  printf '\n==> Installing %s\n' "${missing[*]}"
  local sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null 2>&1 || {
      echo "$name: need root or sudo to install: ${missing[*]}" >&2
      exit 1
    }
    sudo=(sudo)
  fi
  "${sudo[@]}" apt-get update
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
}

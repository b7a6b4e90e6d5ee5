# shellcheck shell=bash
# Debian packages from suites other than the system's own (Debian 12 backports, Debian 13), unpacked
# into a directory of ours; sourced by scripts/test.sh.
#
#   source scripts/lib/extra_debs.sh
#   extra_debs NAME DEST SUITE PACKAGE...
#
# Downloads PACKAGE... from SUITE (e.g. bookworm-backports) of the mirror the system already uses and
# unpacks them with `dpkg -x` into DEST/root (so DEST/root/usr/bin/...). The system's apt sources,
# package lists and installed packages are never touched: apt gets a sources list, a lists directory
# and a cache of its own under DEST. Their dependencies are not installed: the caller installs them
# from the system's own suite. Does nothing when DEST/.done names the same suite and packages.
# Returns non-zero (with a message) when the download fails.

extra_debs() {
  local name="$1" dest="$2" suite="$3"
  shift 3
  local want="$suite $*"
  if [[ -f "$dest/.done" && "$(cat "$dest/.done")" == "$want" ]]; then
    return 0
  fi
  local mirror keyring
  mirror="$(extra_debs_mirror)"
  keyring=/usr/share/keyrings/debian-archive-keyring.gpg
  rm -rf "$dest"
  mkdir -p "$dest/lists/partial" "$dest/cache/archives/partial" "$dest/debs" "$dest/root"
  echo "deb [signed-by=$keyring] $mirror $suite main" >"$dest/sources.list"
  local apt_opts=(-o "Dir::Etc::sourcelist=$dest/sources.list" -o "Dir::Etc::sourceparts=-"
    -o "Dir::State::Lists=$dest/lists" -o "Dir::Cache=$dest/cache" -o "APT::Sandbox::User=root")
  printf '\n==> %s: fetching %s from %s into %s\n' "$name" "$*" "$suite" "$dest"
  if ! apt-get "${apt_opts[@]}" -qq update; then
    echo "$name: apt-get update of $suite failed" >&2
    return 1
  fi
  # apt-get download names exact versions of the suite: ask for pkg/suite so a newer or older copy
  # in the system's own lists is never taken instead.
  local p pkgs=()
  for p in "$@"; do pkgs+=("$p/$suite"); done
  if ! (cd "$dest/debs" && apt-get "${apt_opts[@]}" -qq download "${pkgs[@]}"); then
    echo "$name: apt-get download of $* from $suite failed" >&2
    return 1
  fi
  local deb
  for deb in "$dest"/debs/*.deb; do
    dpkg -x "$deb" "$dest/root"
  done
  echo "$want" >"$dest/.done"
}

# The Debian mirror of the system's own apt sources (deb822 or one-line), else deb.debian.org.
extra_debs_mirror() {
  local uri
  uri="$(grep -hsE '^URIs:' /etc/apt/sources.list.d/debian.sources | awk '{print $2}' | head -n1)"
  if [[ -z "$uri" ]]; then
    uri="$(grep -hsE '^deb ' /etc/apt/sources.list | grep -v security | awk '{print $2}' | head -n1)"
  fi
  echo "${uri:-http://deb.debian.org/debian}"
}

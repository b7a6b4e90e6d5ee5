#!/usr/bin/env bash
# The accuracy study (docs/accuracy.md) in one command: installs what is missing, builds the tool in
# build-accuracy/, runs it, draws the plots into docs/accuracy/*.svg with gnuplot, and writes the
# tables into docs/accuracy.md between its markers. Takes well under a minute on 2 cores.
#
#   scripts/accuracy.sh                # the full study
#   scripts/accuracy.sh --quick        # shorter traces (a smoke run; docs untouched)
#   scripts/accuracy.sh --no-install   # never call apt-get (fail if something is missing)
#
# Env: BUILD_DIR (default build-accuracy/), JOBS (build parallelism, default 1).
set -euo pipefail

usage() { sed -n '2,10s/^# \{0,1\}//p' "$0"; }

QUICK=0
INSTALL=1
for arg in "$@"; do
  case "$arg" in
    --quick) QUICK=1 ;;
    --no-install) INSTALL=0 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "accuracy.sh: unknown argument: $arg" >&2; usage >&2; exit 2 ;;
  esac
done

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${BUILD_DIR:-$ROOT/build-accuracy}"
RESULTS="$BUILD/results"
DOC="$ROOT/docs/accuracy.md"
PLOTS="$ROOT/docs/accuracy"
cd "$ROOT"

# gnuplot-nox: gnuplot without X11, enough for SVG.
PACKAGES=(build-essential cmake ninja-build pkg-config libhiredis-dev libfmt-dev gnuplot-nox)
# shellcheck source=SCRIPTDIR/lib/install.sh
source "$ROOT/scripts/lib/install.sh"
install_missing accuracy.sh "$INSTALL" "${PACKAGES[@]}"

printf '\n==> Building redlimit_accuracy in %s\n' "$BUILD"
GENERATOR_ARGS=()
[[ -f "$BUILD/CMakeCache.txt" ]] || GENERATOR_ARGS=(-G Ninja)
cmake -S "$ROOT" -B "$BUILD" "${GENERATOR_ARGS[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DREDLIMIT_BUILD_TOOLS=ON \
  -DREDLIMIT_BUILD_TESTS=OFF -DREDLIMIT_BUILD_EXAMPLES=OFF -DREDLIMIT_INSTALL=OFF \
  -DREDLIMIT_WITH_LIBEVENT=OFF -DREDLIMIT_WITH_LIBUV=OFF "-DREDLIMIT_WERROR=${REDLIMIT_WERROR:-ON}" >/dev/null
cmake --build "$BUILD" -j "${JOBS:-1}" --target redlimit_accuracy

printf '\n==> Running the study\n'
rm -rf "$RESULTS"
mkdir -p "$RESULTS"
ARGS=(--out "$RESULTS")
[[ $QUICK -eq 1 ]] && ARGS+=(--quick)
# The tool exits non-zero when a check fails (tools/accuracy/checks.cpp); the tables still print.
"$BUILD/tools/accuracy/redlimit_accuracy" "${ARGS[@]}" | tee "$RESULTS/tables.md"

if [[ $QUICK -eq 1 ]]; then
  echo "accuracy.sh: quick run: results in $RESULTS, docs left as they are"
  exit 0
fi

printf '\n==> Plotting into %s\n' "$PLOTS"
mkdir -p "$PLOTS"
plot() {  # plot TRACE TITLE
  gnuplot -e "in='$RESULTS/series_$1.csv'; out='$PLOTS/$1.svg'; title='$2'; limit=100" \
    "$ROOT/tools/accuracy/plot.gp"
}
plot edges "Bursts of 100 on both sides of every other window edge (limit 100/min)"
plot poisson_1x "Poisson at 1x the limit (100/min), first 30 minutes"
plot poisson_2x "Poisson at 2x the limit (100/min), first 30 minutes"
plot poisson_10x "Poisson at 10x the limit (100/min), first 30 minutes"
plot diurnal "A day: Poisson at 0.1x (night) to 1.5x (noon) the limit (100/min)"
plot seed004_c "Seed 004: 100 requests at 0.99 min, 100 more at 1.25 min"

printf '\n==> Writing the tables into %s\n' "$DOC"
# Everything between the markers is replaced by the tool's tables; the rest of the page is kept.
awk -v tables="$RESULTS/tables.md" '
  /<!-- accuracy:begin -->/ { print; while ((getline line < tables) > 0) print line; skip = 1; next }
  /<!-- accuracy:end -->/ { skip = 0 }
  !skip { print }
' "$DOC" >"$DOC.new"
mv "$DOC.new" "$DOC"
echo "accuracy.sh: done ($DOC, $PLOTS/*.svg)"

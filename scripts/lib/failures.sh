# shellcheck shell=bash
# Sourced by scripts/test.sh: a short account of the tests that failed, for the end of a
# long log.
#
#   failure_summary LOG [TITLE]   prints, for each test of a ctest LastTest.log that did not pass,
#                                 its name, its googletest failures (each "file:line: Failure" and
#                                 the lines that explain it) or else the last lines of its output.
#
# CI keeps only the tail of what a run prints; a failure scrolled out by later passes (the sanitizer
# passes run after the first) was invisible there. test.sh appends each pass's summary to
# $REDLIMIT_FAILURES_FILE when it is set, and .ci/run prints that file after its timings.

failure_summary() {
  local log="$1" title="${2:-}"
  [[ -f "$log" ]] || return 0
  awk -v title="$title" '
    function flush(   i, n, shown) {
      if (name == "" || passed) return
      if (!printed_title && title != "") { print "==> tests that failed: " title; printed_title = 1 }
      print "--- " name
      shown = 0
      for (i = 1; i <= nout && shown < 12; i++) {
        # A googletest failure: its location line and what follows up to the next test marker.
        if (out[i] ~ /: Failure$/ || out[i] ~ /^\[  FAILED  \]/ || out[i] ~ /(ERROR|WARNING): [A-Za-z]+Sanitizer/) {
          for (n = i; n <= nout && shown < 12; n++) {
            if (n > i && out[n] ~ /^\[ (RUN|      OK|  FAILED) /) break
            print "    " substr(out[n], 1, 300); shown++
          }
          i = n - 1
        }
      }
      if (shown == 0) for (i = (nout > 12 ? nout - 11 : 1); i <= nout; i++) print "    " substr(out[i], 1, 300)
    }
    /^[0-9]+\/[0-9]+ Testing: / { flush(); name = $3; passed = 0; nout = 0; inout = 0; next }
    /^Output:$/ { inout = 1; next }
    /^<end of output>$/ { inout = 0; next }
    /^Test Passed\.$/ { passed = 1; next }
    inout && !/^-+$/ { out[++nout] = $0 }
    END { flush() }
  ' "$log"
}

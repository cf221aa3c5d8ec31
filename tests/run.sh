#!/bin/sh
# Runs every test binary in BUILD/tests and prints one closing line "N passed, N failed".
# Tests run from the repository root; fixtures are read from $BRASA_SHARED (default ../shared).
build=${1:-build}
# Tests that drive the command line find the binary here.
BRASA_BIN=${BRASA_BIN:-$build/brasa}; export BRASA_BIN
# BRASA_RUNNER runs each binary (e.g. "wine" for the Windows build); BRASA_TEST_SKIP names
# binaries not to run there (e.g. "test_cli.exe"), listed as skipped.
total_p=0; total_f=0; total_s=0; bad=""
for t in "$build"/tests/test_*; do
  case "$t" in *.o|*.d|*.log) continue;; esac
  [ -x "$t" ] || continue
  case " ${BRASA_TEST_SKIP:-} " in *" $(basename "$t") "*)
    printf '%-40s not run here\n' "$(basename "$t")"; continue;; esac
  t0=$(date +%s)
  out=$(${BRASA_RUNNER:-} "$t" 2>"$t.log"); rc=$?
  # a binary that failed under a runner (wine) before printing a byte, on stdout or stderr, did
  # not start: run it once more, and say so
  if [ $rc -ne 0 ] && [ -n "${BRASA_RUNNER:-}" ] && [ -z "$out" ] && [ ! -s "$t.log" ]; then
    echo "$(basename "$t"): exit status $rc under $BRASA_RUNNER with no output; run again" >&2
    out=$(${BRASA_RUNNER:-} "$t" 2>"$t.log"); rc=$?
  fi
  line=$(printf '%s\n' "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed' | tail -n 1)
  p=$(echo "$line" | sed -n 's/^\([0-9]*\) passed.*/\1/p'); p=${p:-0}
  f=$(echo "$line" | sed -n 's/.* \([0-9]*\) failed.*/\1/p'); f=${f:-0}
  s=$(echo "$line" | sed -n 's/.* \([0-9]*\) skipped.*/\1/p'); s=${s:-0}
  if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  if [ "$f" -ne 0 ]; then bad="$bad $t"; cat "$t.log" >&2; fi
  printf '%-40s %4d passed, %d failed, %d skipped (%d s)\n' "$(basename "$t")" "$p" "$f" "$s" \
    $(($(date +%s) - t0))
  total_p=$((total_p+p)); total_f=$((total_f+f)); total_s=$((total_s+s))
done
[ -n "$bad" ] && echo "failing:$bad"
echo "$total_p passed, $total_f failed, $total_s skipped"
[ "$total_f" -eq 0 ]

#!/usr/bin/env bash
# Sets up the machine (scripts/setup.sh), builds, and runs every test: the
# lit suite, then each fuzzer on a fixed count of inputs (scripts/fuzz.sh).
#   scripts/test.sh          the default suite (under 20 minutes on 2 cores)
#   scripts/test.sh --long   the fuzzers for 10 million executions each instead,
#                            then the lit suite again on the sanitized build
#                            (build-fuzz/: ASan and UBSan in cleave and in every
#                            program it compiles)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
fuzz=()
long=0
case "${1:-}" in
  --long) fuzz=(--runs 10000000); long=1; export CLEAVE_LONG=1 ;;
  "") ;;
  *) echo "usage: scripts/test.sh [--long]" >&2; exit 2 ;;
esac
"$root/scripts/setup.sh"

log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
/usr/lib/llvm-22/bin/lit -sv "$root/build/test" 2>&1 | tee "$log" || status=$?
passed=$(sed -n 's/^ *Passed *: *\([0-9]*\).*/\1/p' "$log" | head -1)
failed=$(sed -n 's/^ *Failed *: *\([0-9]*\).*/\1/p' "$log" | head -1)
echo "lit: ${passed:-0} passed, ${failed:-0} failed"

fuzz_status=0
"$root/scripts/fuzz.sh" ${fuzz[@]+"${fuzz[@]}"} || fuzz_status=$?
if [ $fuzz_status -ne 0 ]; then
  echo "fuzz: FAILED (exit $fuzz_status; the inputs are in build-fuzz/findings/)"
  status=1
fi

if [ $long -eq 1 ]; then
  cmake --build "$root/build-fuzz"
  /usr/lib/llvm-22/bin/lit -sv "$root/build-fuzz/test" || status=1
fi
exit $status

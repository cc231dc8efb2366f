#!/usr/bin/env bash
# Sets up the machine (scripts/setup.sh), builds, and runs every test.
#   scripts/test.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"

log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
/usr/lib/llvm-22/bin/lit -sv "$root/build/test" 2>&1 | tee "$log" || status=$?
passed=$(sed -n 's/^ *Passed *: *\([0-9]*\).*/\1/p' "$log" | head -1)
failed=$(sed -n 's/^ *Failed *: *\([0-9]*\).*/\1/p' "$log" | head -1)
echo "lit: ${passed:-0} passed, ${failed:-0} failed"
exit $status

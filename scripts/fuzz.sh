#!/bin/sh
# Builds the fuzz targets of the program's readers (test/fuzz: plan.json and
# .npy) with clang's libFuzzer, ASan and UBSan into build-fuzz/, and runs each
# for N seconds (default 60) from the seed corpus in test/fuzz/corpus/.
# Inputs that crash are left in build-fuzz/ as crash-*; the exit status is
# non-zero if any target found one.
#
#   scripts/fuzz.sh [--seconds N]
set -eu
cd "$(dirname "$0")/.."
seconds=60
if [ "${1:-}" = "--seconds" ]; then
  seconds=${2:?--seconds takes a number}
fi
CXX=${CXX:-clang++} cmake -S . -B build-fuzz -G Ninja -DCLEAVE_FUZZ=ON \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C build-fuzz cleave-fuzz-plan cleave-fuzz-npy
status=0
for target in plan npy; do
  # The corpus grows in build-fuzz/; the checked-in seeds stay as they are.
  corpus=build-fuzz/corpus-$target
  mkdir -p "$corpus"
  (cd build-fuzz && bin/cleave-fuzz-$target -max_total_time="$seconds" -rss_limit_mb=2048 \
     -print_final_stats=1 "corpus-$target" "../test/fuzz/corpus/$target") \
     >build-fuzz/fuzz-$target.log 2>&1 || status=1
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' build-fuzz/fuzz-$target.log |
          grep -o '[0-9]*$' || echo "?")
  crashes=$(ls build-fuzz/crash-* build-fuzz/leak-* build-fuzz/oom-* build-fuzz/timeout-* \
            2>/dev/null | wc -l)
  echo "cleave-fuzz-$target: $execs executions in ${seconds} s, $crashes findings so far" \
       "(log: build-fuzz/fuzz-$target.log)"
done
exit $status

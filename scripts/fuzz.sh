#!/usr/bin/env bash
# Builds the libFuzzer targets (clang; AddressSanitizer and UBSan, every
# finding fatal) into build-fuzz/ and runs each one: the importer on seeds
# made from every model of the repository and the ONNX backend tests, the
# program's plan.json and .npy readers on test/fuzz/corpus/. The corpora grow
# in build-fuzz/corpus/. Exit 0: no finding; otherwise the finding's input
# is left in build-fuzz/findings/ and the exit code is non-zero.
#   scripts/fuzz.sh                       about a minute each, the same inputs
#                                         every time on a fresh build folder
#   scripts/fuzz.sh --seconds N | --runs N   each target, random seeds
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# The default run is the suite's: a fixed seed and a fixed count of inputs
# per target (about a minute each on this project's 2-core machine), so that
# what it tries does not depend on the machine's speed.
declare -A quick_runs=([import]=100000 [plan]=1000000 [npy]=5000000)
limit=()
case "${1:-}" in
  --seconds) limit=(-max_total_time="${2:?--seconds takes a number}") ;;
  --runs) limit=(-runs="${2:?--runs takes a number}") ;;
  "") ;;
  *) echo "usage: scripts/fuzz.sh [--seconds N | --runs N]" >&2; exit 2 ;;
esac
build="$root/build-fuzz"
targets=(import plan npy)

CXX=clang++ cmake -S "$root" -B "$build" -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCLEAVE_FUZZ=ON \
  -DPython3_EXECUTABLE="$root/.venv/bin/python" \
  -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >/dev/null
cmake --build "$build" --target "${targets[@]/#/cleave-fuzz-}"

# The importer's seeds: each model behind the options byte its target reads
# first (0: none; 4: the training_info step, for the models that have one).
seeds="$build/corpus/import-seeds"
rm -rf "$seeds" && mkdir -p "$seeds"
node_tests=$("$root/.venv/bin/python" -c \
  "import onnx, os; print(os.path.join(os.path.dirname(onnx.__file__), 'backend/test/data'))")
n=0
while IFS= read -r -d '' model; do
  { printf '\0'; cat "$model"; } > "$seeds/$n.seed"
  { printf '\4'; cat "$model"; } > "$seeds/$n.training.seed"
  n=$((n + 1))
done < <(find "$root/examples" "$node_tests" -name '*.onnx' -size -64k -print0)

findings="$build/findings"
mkdir -p "$findings" "$build/tmp"
export TMPDIR="$build/tmp"  # the importer target's model files
# The targets run side by side (each one process on one core); their
# results are reported in order once all have finished.
declare -A pids
for target in "${targets[@]}"; do
  case $target in
    import) from="$seeds" ;;
    *) from="$root/test/fuzz/corpus/$target" ;;
  esac
  corpus="$build/corpus/$target"
  mkdir -p "$corpus"
  runs=("${limit[@]}")
  [ ${#runs[@]} -gt 0 ] || runs=(-seed=1 -runs="${quick_runs[$target]}")
  "$build/bin/cleave-fuzz-$target" "$corpus" "$from" "${runs[@]}" -rss_limit_mb=4096 \
    -max_len=262144 -timeout=30 -print_final_stats=1 \
    -artifact_prefix="$findings/$target-" > "$build/fuzz-$target.log" 2>&1 &
  pids[$target]=$!
done
status=0
for target in "${targets[@]}"; do
  wait "${pids[$target]}" || status=1
  log="$build/fuzz-$target.log"
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  found=$(find "$findings" -name "$target-*" | wc -l)
  echo "fuzz: cleave-fuzz-$target: ${execs:-?} executions, $found findings (log: $log)"
  grep -m1 -A3 -E 'runtime error|ERROR: (AddressSanitizer|libFuzzer)' "$log" || true
done
exit $status

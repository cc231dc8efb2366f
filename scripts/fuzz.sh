#!/usr/bin/env bash
# Builds the libFuzzer targets (clang; AddressSanitizer and UBSan, every
# finding fatal) into build-fuzz/ and runs each on a seed corpus made from
# the test models. Exit 0: no finding; otherwise the finding's input is left
# in build-fuzz/findings/ and the exit code is non-zero.
#   scripts/fuzz.sh [--seconds N | --runs N]   (default: 60 seconds each)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
limit=(-max_total_time=60)
case "${1:-}" in
  --seconds) limit=(-max_total_time="$2") ;;
  --runs) limit=(-runs="$2") ;;
  "") ;;
  *) echo "usage: scripts/fuzz.sh [--seconds N | --runs N]" >&2; exit 2 ;;
esac
build="$root/build-fuzz"

CXX=clang++ cmake -S "$root" -B "$build" -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCLEAVE_FUZZ=ON \
  -DPython3_EXECUTABLE="$root/.venv/bin/python" \
  -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >/dev/null
cmake --build "$build" --target cleave-fuzz-import

# Seeds: every model the repository and the ONNX backend tests hold, each
# behind the options byte the importer target reads first (0: none; 4: the
# training_info step, for the models that have one).
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
echo "fuzz: $n seed models"

corpus="$build/corpus/import"
findings="$build/findings"
mkdir -p "$corpus" "$findings" "$build/tmp"
export TMPDIR="$build/tmp"  # the targets' model files
status=0
"$build/bin/cleave-fuzz-import" "$corpus" "$seeds" "${limit[@]}" -rss_limit_mb=4096 \
  -max_len=262144 -timeout=30 -print_final_stats=1 -artifact_prefix="$findings/import-" \
  2>&1 | grep -v '^#[0-9]*.*\(NEW\|REDUCE\|pulse\)\|NEW_FUNC' || status=$?
exit $status

#!/usr/bin/env bash
# Sets up the machine (scripts/setup.sh), builds, and shows the main path on
# the bundled example: import (IR summary), compile to a native program, run
# one forward on random inputs, and compare the loss with onnxruntime's.
#   scripts/demo.sh [MODEL.onnx]      (a model whose inputs are x and labels)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
model=${1:-$root/examples/mlp/model.onnx}
cleave="$root/build/bin/cleave"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== cleave import --summary"
"$cleave" import "$model" --summary
echo
echo "== cleave compile -o $work/out"
"$cleave" compile "$model" -o "$work/out"
ls "$work/out"
echo
echo "== cleave run (random inputs), against onnxruntime"
"$root/.venv/bin/python" - "$model" "$work" <<'PY'
import sys
import numpy as np
import onnxruntime as ort
model, work = sys.argv[1], sys.argv[2]
session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
rng = np.random.default_rng(0)
feeds = {}
for spec in session.get_inputs():
    shape = spec.shape
    if spec.type == "tensor(float)":
        feeds[spec.name] = rng.standard_normal(shape).astype(np.float32)
    else:
        feeds[spec.name] = rng.integers(0, 10, shape).astype(np.int64)
    np.save(f"{work}/{spec.name}.npy", feeds[spec.name])
np.save(f"{work}/ort_loss.npy", session.run(None, feeds)[0])
PY
inputs=()
for f in "$work"/*.npy; do
  name=$(basename "$f" .npy)
  [ "$name" = ort_loss ] || inputs+=(--input "$name=$f")
done
"$cleave" run "$work/out" "${inputs[@]}" --output-dir "$work/results" --stats
"$root/.venv/bin/python" -c "
import numpy as np
ours = np.load('$work/results/loss.npy'); ref = np.load('$work/ort_loss.npy')
print(f'loss: cleave {float(ours):.7f}, onnxruntime {float(ref):.7f}')"

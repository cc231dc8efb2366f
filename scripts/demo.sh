#!/usr/bin/env bash
# Sets up the machine (scripts/setup.sh), builds, and shows the main path on
# the bundled example: import (IR summary), compile to a native program and
# check one forward against onnxruntime, then compile the training step for
# a data-parallel mesh of 2 ranks and train it (Adam) on a small synthetic
# classification set on 2 local ranks: the loss falls.
#   scripts/demo.sh [MODEL.onnx]      (an MLP whose inputs are x and labels)
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

echo
echo "== cleave compile --train --optimizer adam --mesh dp=2, then train 3 epochs on 2 ranks"
"$cleave" compile "$model" -o "$work/train" --train --optimizer adam --lr 0.01 \
  --mesh dp=2 --batch-size 16
"$root/.venv/bin/python" - "$work" <<'PY'
import sys
import numpy as np
work = sys.argv[1]
x = np.load(f"{work}/x.npy")
rng = np.random.default_rng(1)
data = rng.standard_normal((512,) + x.shape[1:]).astype(np.float32)
teacher = rng.standard_normal((x.shape[1], 10)).astype(np.float32)
np.save(f"{work}/train_x.npy", data)
np.save(f"{work}/train_labels.npy", np.argmax(data @ teacher, axis=1).astype(np.int64))
PY
"$cleave" run -n 2 "$work/train" --data "x=$work/train_x.npy,labels=$work/train_labels.npy" \
  --epochs 3 --seed 7 --log-json "$work/metrics.json" --save-onnx "$work/trained.onnx"
"$root/.venv/bin/python" -c "
import json
losses = [s['loss'] for s in json.load(open('$work/metrics.json'))['steps']]
print(f'mean loss: first 20 steps {sum(losses[:20]) / 20:.4f}, last 20 steps {sum(losses[-20:]) / 20:.4f}')"

#!/usr/bin/env bash
# Sets up the machine (scripts/setup.sh), builds, and imports the bundled
# example model: prints its cleave IR, then a one-screen summary.
#   scripts/demo.sh [MODEL.onnx]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
model=${1:-$root/examples/mlp/model.onnx}
"$root/build/bin/cleave" import "$model"
echo
"$root/build/bin/cleave" import "$model" --summary

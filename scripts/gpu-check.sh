#!/usr/bin/env bash
# Checks the CUDA target on a GPU machine that has CUDA and PyTorch but no
# MLIR and no package registry (docs/gpu-check.md):
#
#   scripts/gpu-check.sh pack [-o PACK] [--timing gpt2|tiny]
#       on this machine, after scripts/setup.sh: compiles the test models and
#       a GPT-2-size decoder with --target cuda --emit cpp, trains the test
#       models on the CPU for the reference losses, and packs them with the
#       runtime's sources and what building it needs (default PACK:
#       build/gpu-check.tar.gz, under 64 MiB);
#   scripts/gpu-check.sh run [PACK] [--summary FILE]
#       on the GPU machine: unpacks PACK into a temporary folder, builds the
#       runtime, its CUDA and NCCL tests and the programs with nvcc (sm_90),
#       runs the tests, trains the models against the CPU losses and times the
#       GPT-2-size step against PyTorch; prints one summary. Without a GPU only
#       the build runs and the rest is reported unsupported.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
usage="usage: scripts/gpu-check.sh pack [-o PACK] [--timing gpt2|tiny] | run [PACK] [--summary FILE]"

case "${1:-}" in
pack)
  shift
  output="$root/build/gpu-check.tar.gz"
  args=()
  while (($#)); do
    case "$1" in
    -o) output=$2; shift 2 ;;
    *) args+=("$1"); shift ;;
    esac
  done
  exec "$root/.venv/bin/python" "$root/scripts/gpu-check/pack.py" -o "$output" "${args[@]}"
  ;;
run)
  shift
  pack="$root/build/gpu-check.tar.gz"
  if (($#)) && [[ $1 != --* ]]; then
    pack=$1
    shift
  fi
  if [[ ! -f $pack ]]; then
    echo "gpu-check: error: $pack: no pack there: make one with scripts/gpu-check.sh pack" >&2
    exit 2
  fi
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  tar -xzf "$pack" -C "$work"
  # The machine's python3 is the one with PyTorch on the GPU machine; the
  # build machine's venv stands in where there is none.
  python=$(command -v python3 || true)
  if ! "$python" -c "import numpy" 2>/dev/null; then
    python="$root/.venv/bin/python"
  fi
  "$python" "$work/gpu-check/check.py" "$@"
  ;;
*)
  echo "$usage" >&2
  exit 2
  ;;
esac

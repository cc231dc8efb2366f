#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine (as root) for Cleave and builds it.
# Idempotent: a second run only rebuilds what changed.
#   scripts/setup.sh            install dependencies, create .venv, build into build/
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

debian_packages=(
  cmake ninja-build g++ ccache clang libclang-rt-14-dev
  libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools
  protobuf-compiler libprotobuf-dev
  libcli11-dev nlohmann-json3-dev libopenblas-dev libdnnl-dev
  libopenmpi-dev openmpi-bin libgtest-dev procps
  python3-venv python3-pip python3-torch python3-torchvision python3-numpy
)

missing=()
for p in "${debian_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Debian's python3 (not a pyenv shim): python3-torch lives there, and the venv
# sees it through --system-site-packages. numpy stays below 2 for torch 1.13.
venv="$root/.venv"
if [ ! -x "$venv/bin/python" ]; then
  /usr/bin/python3 -m venv --system-site-packages "$venv"
fi
if ! "$venv/bin/python" -c "import onnx, onnxruntime, torch, numpy, safetensors, transformers, matplotlib" 2>/dev/null; then
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$root/scripts/requirements.txt"
fi

cmake -S "$root" -B "$root/build" -G Ninja \
  -DCMAKE_BUILD_TYPE=Release \
  -DPython3_EXECUTABLE="$venv/bin/python" \
  -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >/dev/null
cmake --build "$root/build"

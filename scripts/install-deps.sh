#!/usr/bin/env bash
# Installs the Debian packages stepc needs, skipping any already installed.
# Every entry point (make build/test/demo, .ci/run) calls this first.
set -euo pipefail

# What each package is for:
#   MLIR/LLVM 19: the dialect, passes, stepc-opt; llvm-19-tools brings FileCheck, lit.
#   libabsl-dev: statuses and containers; libgtest-dev: unit tests.
#   cmake, ninja-build, ccache: the build; python3: lit and the model generator.
#   python3-torch, python3-numpy: the numerical oracle (scripts/torch_check.py).
#   python3-scipy: the exact MILP bounding rematerialisation (bench/remat).
#   libopenblas-openmp-dev: CPU GEMMs, the OpenMP build (one thread pool).
#   libdnnl-dev: oneDNN, the CPU bf16 GEMMs (AMX / AVX512-BF16) of --precision=bf16.
#   openmpi-bin, libopenmpi-dev: launching ranks (mpirun) and CPU collectives.
#   clang, libclang-rt-14-dev: the libFuzzer targets (scripts/fuzz.sh).
#   nlohmann-json3-dev, zlib1g-dev: checkpoint metadata and checksums.
#   pkg-config: the install test builds against the installed stepc.pc.
#   libboost-context-dev: the fibers of the emulated CUDA kernels' blocks.
packages=(
  cmake ninja-build ccache g++ python3
  llvm-19-dev llvm-19-tools libmlir-19-dev mlir-19-tools
  libabsl-dev libgtest-dev
  python3-torch python3-numpy python3-scipy
  libopenblas-openmp-dev libdnnl-dev
  openmpi-bin libopenmpi-dev
  clang libclang-rt-14-dev
  nlohmann-json3-dev zlib1g-dev pkg-config libboost-context-dev
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"

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
#   python3-pip: fetches the cuDNN frontend's headers (below).
packages=(
  cmake ninja-build ccache g++ python3
  llvm-19-dev llvm-19-tools libmlir-19-dev mlir-19-tools
  libabsl-dev libgtest-dev
  python3-torch python3-numpy python3-scipy
  libopenblas-openmp-dev libdnnl-dev
  openmpi-bin libopenmpi-dev
  clang libclang-rt-14-dev
  nlohmann-json3-dev zlib1g-dev pkg-config libboost-context-dev python3-pip
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The cuDNN frontend's C++ headers (header-only; cuDNN itself is loaded at
# run time), for the CUDA back end's fused flash attention: only where the
# CUDA toolkit is, from the package index's nvidia-cudnn-frontend wheel,
# version pinned. Without them (no network) the build leaves the cuDNN path
# out and says so; attention runs on stepc's own kernels.
cudnn_frontend_version=1.32.0
cudnn_frontend_dir=/opt/cudnn-frontend-$cudnn_frontend_version
if { command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; } &&
   [ ! -f "$cudnn_frontend_dir/include/cudnn_frontend.h" ]; then
  echo "install-deps: cuDNN frontend $cudnn_frontend_version headers into $cudnn_frontend_dir"
  wheels=$(mktemp -d)
  if python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
       "nvidia-cudnn-frontend==$cudnn_frontend_version" -d "$wheels" >/dev/null 2>&1; then
    $SUDO python3 - "$wheels" "$cudnn_frontend_dir" <<'PY' || true
import glob, os, shutil, sys, zipfile
wheel = glob.glob(os.path.join(sys.argv[1], "*.whl"))[0]
shutil.rmtree(sys.argv[2] + ".partial", ignore_errors=True)
with zipfile.ZipFile(wheel) as z:
    members = [m for m in z.namelist() if m.startswith("include/")]
    z.extractall(sys.argv[2] + ".partial", members)
os.rename(sys.argv[2] + ".partial", sys.argv[2])
PY
    [ -f "$cudnn_frontend_dir/include/cudnn_frontend.h" ] ||
      echo "install-deps: the nvidia-cudnn-frontend wheel held no headers: the CUDA back end builds without cuDNN attention" >&2
  else
    echo "install-deps: cannot download nvidia-cudnn-frontend: the CUDA back end builds without cuDNN attention" >&2
  fi
  rm -rf "$wheels"
fi

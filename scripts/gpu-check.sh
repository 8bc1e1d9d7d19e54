#!/usr/bin/env bash
# Every check that needs a GPU, as one command for the machine lent to some
# issues (DEVELOPERS.md, `device`); about 8 minutes on an H200 (the Llama's
# torch.compile warm-up is the longest part):
#   1. cuda_kernels_test: every CUDA kernel against the CPU kernel of its op;
#   2. gpt-small CPU-vs-GPU parity: fp32 gradients (the AdamW first moments
#      after step 1) within 1e-4 relative, and so for a mixture of experts
#      (gpt-moe) and a padding-masked attention; fp8's loss within 1e-3 and
#      its gradient norm within 2e-3; bf16 loss within 1% of the CPU's fp32
#      loss after 20 steps;
#   3. gpt-small trained 100 steps on the GPU (loss curve as JSON and SVG),
#      then 64 characters sampled by its one-row sampling step;
#   4. gpt2-124m (T=1024) and a 1.1B Llama (T=2048), bf16, each at the
#      largest compiled batch that fits: tokens/s and MFU (989 TFLOP/s dense
#      bf16) next to the same model under PyTorch torch.compile in the same
#      run, the step again with our own attention instead of cuDNN's, and the
#      --profile build's per-kernel table against each kind's floor
#      (scripts/profile_floor.py);
#   4b. gpt2-124m in fp8 against its bf16 step (tokens/s, same run; and
#      with the fp8 GEMMs run in bf16), its --profile table, its loss after
#      200 steps (batch 8)
#      within 1% of bf16's;
#   5. the NCCL communicator test (one rank) when NCCL was built.
# Every figure lands in $OUT/gpu-check.json (default build/gpu-check).
#
# The GPU machine has no MLIR, Abseil or OpenMPI and no network, so the
# binaries come prebuilt from `scripts/gpu-bundle.sh` (run it here, carry
# build/gpu-bundle.tar.xz, which is unpacked here when the folder is not
# there). On a machine that can build, a missing bundle is made.
# Without a GPU, `scripts/gpu-bundle.sh --emulated` and
# `scripts/gpu-check.sh --train-steps 5` run the checks on the host emulation
# of CUDA (the script's own test; no benchmark).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-build/gpu-check}
bundle=${STEPC_GPU_BUNDLE:-build/gpu-bundle}
mkdir -p "$out"
if [ ! -x "$bundle/bin/stepc-run" ] && [ -f "$bundle.tar.xz" ]; then
  echo "gpu-check: unpacking $bundle.tar.xz"
  tar -C "$(dirname "$bundle")" -xJf "$bundle.tar.xz" ||
    python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" \
      "$bundle.tar.xz" "$(dirname "$bundle")"
fi
if [ ! -x "$bundle/bin/stepc-run" ]; then
  echo "gpu-check: no bundle at $bundle: building one"
  make build && scripts/gpu-bundle.sh "$bundle" || { echo "gpu-check: cannot build" >&2; exit 1; }
fi
# The first Python that has numpy (the PATH's python3 may be a bare one).
py=""
for candidate in ${STEPC_PYTHON:-} python3 /usr/bin/python3 /usr/local/bin/python3 python; do
  if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c "import numpy" 2>/dev/null; then
    py=$candidate
    break
  fi
done
if [ -z "$py" ]; then
  echo "gpu-check: no Python with numpy found (set STEPC_PYTHON)" >&2
  exit 1
fi
# CUDA's libraries: the toolkit's, else the pip wheels PyTorch brings.
wheels=$("$py" - <<'PY' 2>/dev/null
import glob, os
try:
    import nvidia
    roots = list(nvidia.__path__)
except Exception:
    roots = []
print(":".join(d for r in roots for d in glob.glob(os.path.join(r, "*", "lib"))))
PY
)
export LD_LIBRARY_PATH="$PWD/$bundle/lib:/usr/local/cuda/lib64:${wheels}:${LD_LIBRARY_PATH:-}"
export PYTHONUNBUFFERED=1
exec "$py" scripts/gpu_check.py --bundle "$bundle" --out "$out" "$@"

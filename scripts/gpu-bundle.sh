#!/usr/bin/env bash
# Prepares everything scripts/gpu-check.sh runs on the GPU machine, which has
# CUDA, PyTorch, CMake and ninja but no MLIR, Abseil or OpenMPI, and no
# network: built here, carried there as one compressed file (device
# `carry: ["build/gpu-bundle.tar.xz"]`; what travels to the device is capped
# at 64 MiB, the folder itself is ~106 MB, the file ~19 MiB), which
# scripts/gpu-check.sh unpacks there.
#   bin/    stepc-run, cuda_kernels_test
#   lib/    the runtime, its CUDA device layer, and the non-system libraries
#           they need (Abseil, OpenMPI, ...); CUDA's own come from the machine
#   steps/  CUDA step.so files (sm_90a): gpt-small fp32 and bf16, gpt2-124m
#           bf16 at batch 8..64 (gpu-check runs the largest that fits), with
#           their compile-time reports, and each one's --profile build;
#           llama-1b (1.1B, T=2048) bf16 at batch 2..8 likewise; gpt2-124m
#           fp8 at batch 8 and 64
#   ref/    the CPU target's results on the same data and seed: parameters and
#           moments after 1 step, the losses of 20 steps; and after 1 step of
#           the ops no GPU has run yet: a mixture of experts (gpt-moe), a
#           padding-masked attention (gpt-small --pad-token) and fp8
# Usage: scripts/gpu-bundle.sh [--emulated] [DIR]  (default build/gpu-bundle;
# needs `make build`). --emulated builds the gpt-small step.so files for the
# host emulation of CUDA instead (no gpt2-124m): `gpu-check.sh` then runs
# its parity and training checks on this machine, which tests the script.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
emulated=""
if [ "${1:-}" = "--emulated" ]; then
  emulated="--cuda-emulation"
  shift
fi
bundle=${1:-$build/gpu-bundle}
for f in "$build/bin/stepc" "$build/bin/stepc-run" "$build/bin/cuda_kernels_test" \
         "$build/lib/libstepc_runtime_cuda.so"; do
  [ -e "$f" ] || { echo "gpu-bundle: $f is missing: run 'make build' where nvcc is present" >&2; exit 1; }
done
rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib" "$bundle/steps" "$bundle/ref"
# The commit the bundle was built from (gpu_check.py records it).
git rev-parse HEAD > "$bundle/COMMIT" 2>/dev/null || echo unknown > "$bundle/COMMIT"
git diff --quiet HEAD 2>/dev/null || echo "(with uncommitted changes)" >> "$bundle/COMMIT"
cp "$build/bin/stepc-run" "$bundle/bin/"
if [ -n "$emulated" ]; then
  # The script's self-test on the host: the kernels' host emulation stands in
  # for the GPU test, and there is no NCCL check; gpu_check.py reads the mark.
  cp "$build/bin/cuda_kernels_emulated_test" "$bundle/bin/cuda_kernels_test"
  touch "$bundle/EMULATED"
else
  cp "$build/bin/cuda_kernels_test" "$bundle/bin/"
fi
cp "$build/lib/libstepc_runtime.so" "$build/lib/libstepc_runtime_cuda.so" "$bundle/lib/"
# NCCL's communicator and its test, where NCCL was found (libnccl itself comes
# from the GPU machine: its toolkit or PyTorch's wheel).
if [ -z "$emulated" ] && [ -e "$build/bin/nccl_communicator_test" ]; then
  cp "$build/bin/nccl_communicator_test" "$bundle/bin/"
  cp "$build/lib/libstepc_runtime_nccl.so" "$bundle/lib/"
fi
ldd "$bundle"/bin/* "$bundle"/lib/*.so | awk '/=> \//{print $3}' | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libstdc++*|libgcc_s*) ;;
    libcuda*|libcudart*|libcublas*|libnccl*|libstepc*) ;;
    *) cp -L "$lib" "$bundle/lib/" ;;
  esac
done

stepc="$build/bin/stepc"
echo "gpu-bundle: compiling CUDA step.so files (sm_90a)"
"$stepc" examples/gpt-small/model.mlir -o "$bundle/steps/gpt-small.so" $emulated \
  --report="$bundle/steps/gpt-small.json"
"$stepc" examples/gpt-small/model.mlir -o "$bundle/steps/gpt-small-bf16.so" --precision=bf16 \
  $emulated
# The kernels only the emulation has run: the MoE routing and grouped
# products, the masked attention, fp8's tile rounding (fp32 steps, each
# against the CPU's first step).
masked=$(mktemp)
python3 examples/gen_model.py --preset gpt-small --pad-token 0 -o "$masked"
"$stepc" examples/gpt-moe/model.mlir -o "$bundle/steps/gpt-moe.so" $emulated
"$stepc" "$masked" -o "$bundle/steps/gpt-masked.so" $emulated
"$stepc" examples/gpt-small/model.mlir --precision=fp8 -o "$bundle/steps/gpt-small-fp8.so" $emulated
[ -n "$emulated" ] && cp "$build/lib/libstepc_runtime_cuda_emulated.so" "$bundle/lib/"
for b in $([ -n "$emulated" ] || echo 8 16 32 64); do
  "$stepc" examples/gpt2-124m/model.mlir --batch=$b --precision=bf16 \
    -o "$bundle/steps/gpt2-124m-bf16-b$b.so" --report="$bundle/steps/gpt2-124m-bf16-b$b.json"
  # Its --profile twin: the per-kernel table with floors (gpu_check.py).
  "$stepc" examples/gpt2-124m/model.mlir --batch=$b --precision=bf16 --profile \
    -o "$bundle/steps/gpt2-124m-bf16-b$b-profile.so"
done
# fp8 (cuBLASLt's block-scaled fp8 GEMMs): timed against the bf16 step at
# batch 64, its loss after 200 steps against bf16's at batch 8.
for b in $([ -n "$emulated" ] || echo 8 64); do
  "$stepc" examples/gpt2-124m/model.mlir --batch=$b --precision=fp8 \
    -o "$bundle/steps/gpt2-124m-fp8-b$b.so" --report="$bundle/steps/gpt2-124m-fp8-b$b.json"
done
# Its --profile twin at the timed batch: where the fp8 step's time goes.
[ -n "$emulated" ] || "$stepc" examples/gpt2-124m/model.mlir --batch=64 --precision=fp8 \
  --profile -o "$bundle/steps/gpt2-124m-fp8-b64-profile.so"
# The second workload: a 1.1B Llama at T=2048 (bench/cuda_step/torch_llama.py
# is its torch.compile peer).
for b in $([ -n "$emulated" ] || echo 2 4 8); do
  "$stepc" examples/llama-1b/model.mlir --batch=$b --precision=bf16 \
    -o "$bundle/steps/llama-1b-bf16-b$b.so" --report="$bundle/steps/llama-1b-bf16-b$b.json"
  "$stepc" examples/llama-1b/model.mlir --batch=$b --precision=bf16 --profile \
    -o "$bundle/steps/llama-1b-bf16-b$b-profile.so"
done

echo "gpu-bundle: CPU references"
ref=$(mktemp -d)
"$stepc" examples/gpt-small/model.mlir --target=cpu -o "$ref/gpt-small-cpu.so"
"$build/bin/stepc-run" "$ref/gpt-small-cpu.so" --steps 1 --save-npy "$bundle/ref/step1" >/dev/null
"$build/bin/stepc-run" "$ref/gpt-small-cpu.so" --steps 20 --metrics "$bundle/ref/cpu20.jsonl" \
  >/dev/null
"$stepc" examples/gpt-moe/model.mlir --target=cpu -o "$ref/gpt-moe-cpu.so"
"$build/bin/stepc-run" "$ref/gpt-moe-cpu.so" --steps 1 --save-npy "$bundle/ref/moe-step1" >/dev/null
"$stepc" "$masked" --target=cpu -o "$ref/gpt-masked-cpu.so"
"$build/bin/stepc-run" "$ref/gpt-masked-cpu.so" --steps 1 --save-npy "$bundle/ref/masked-step1" \
  >/dev/null
"$stepc" examples/gpt-small/model.mlir --target=cpu --precision=fp8 -o "$ref/gpt-small-fp8-cpu.so"
"$build/bin/stepc-run" "$ref/gpt-small-fp8-cpu.so" --steps 1 --save-npy "$bundle/ref/fp8-step1" \
  >/dev/null
rm -rf "$ref" "$masked"
du -sh "$bundle"
# What the device call carries (its working tree and carried paths: 64 MiB).
tar -C "$(dirname "$bundle")" -cJf "$bundle.tar.xz" "$(basename "$bundle")"
size=$(stat -c %s "$bundle.tar.xz")
echo "gpu-bundle: $bundle.tar.xz, $((size / 1048576)) MiB: carry it"
if [ "$size" -gt $((48 * 1048576)) ]; then
  echo "gpu-bundle: $bundle.tar.xz is over 48 MiB: with the repository it may not fit the" \
       "device's 64 MiB" >&2
fi

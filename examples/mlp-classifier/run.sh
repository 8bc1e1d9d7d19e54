#!/usr/bin/env bash
# Trains the MLP classifier end to end on the CPU: the data, the step, 1000
# steps with the validation loss and accuracy every 200.
#   examples/mlp-classifier/run.sh [BUILD_DIR] [OUT_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
out=${2:-$build/mlp-classifier}
mkdir -p "$out"
/usr/bin/python3 "$here/make_data.py" "$out/data"
"$build/bin/stepc" "$here/model.mlir" --target=cpu -o "$out/step.so" --report="$out/report.json"
"$build/bin/stepc-run" "$out/step.so" --batch-npy "$out/data/train" \
  --val-batch-npy "$out/data/val" --eval-every 200 --steps 1000 --lr 1e-2 --warmup 20 \
  --log-every 200 --metrics "$out/metrics.jsonl" --plot "$out/loss.svg"

#!/usr/bin/env bash
# The main job on the embedded default. Until the CPU back end lands this
# verifies the bundled GPT model (gpt-capstone, B=32) and prints its report;
# it becomes real training with `stepc` and `stepc-run`.
set -euo pipefail
build=${1:-build}
model=examples/gpt-capstone/model.mlir

echo "== verifying $model"
"$build/bin/stepc-opt" "$model" -o /dev/null
echo "ok: parses and verifies"
echo "== model report (stepc-opt --step-report $model)"
"$build/bin/stepc-opt" --step-report "$model" -o /dev/null

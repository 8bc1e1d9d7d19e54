#!/usr/bin/env bash
# The main job on the embedded default: compile gpt-capstone (875K
# parameters, B=32, T=128) for the CPU and train it on the embedded corpus
# (Shakespeare's sonnets, character tokens) for 300 steps; the loss falls
# from ln(512) = 6.24, and samples of the text it learned show it midway
# and at the end. Writes the report, metrics and the loss curve to
# build/demo/.
set -euo pipefail
build=${1:-build}
steps=${STEPS:-300}
model=examples/gpt-capstone/model.mlir
out=$build/demo
mkdir -p "$out"

echo "== stepc $model -o $out/step.so --target=cpu --report=$out/report.json"
"$build/bin/stepc" "$model" -o "$out/step.so" --target=cpu --report="$out/report.json"
python3 - "$out/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"   params {r['params']:,} | model FLOPs/step {r['model_flops_per_step']:,} | "
      f"planned peak {r['planned_peak_bytes'] / 1e6:.1f} MB | "
      f"saved activations/block {r['saved_activation_bytes_per_block']:,} B | "
      f"{r['kernels_per_step']} kernels/step")
PY
echo "== stepc-run $out/step.so --steps $steps (embedded corpus)"
"$build/bin/stepc-run" "$out/step.so" --steps "$steps" --lr 3e-3 --warmup 20 --log-every 25 \
  --metrics "$out/metrics.jsonl" --plot "$out/loss.svg" \
  --sample 80 --sample-every $(( (steps + 1) / 2 )) --prompt "Shall I compare thee"
echo "== loss curve: $out/loss.svg, metrics: $out/metrics.jsonl"

#!/usr/bin/env bash
# What the compiler makes of a fixed set of configurations, for refactors
# that must not change it: the final IR (--emit=mlir), the emitted C++ or
# CUDA source (--emit=source), the report (--report) and the memory plot
# (--memory-plot) of each, written to DIR/<n>.mlir, .src, .json and .svg.
#
#   scripts/emit_snapshot.sh /tmp/before      # on the old build
#   ... change, rebuild ...
#   scripts/emit_snapshot.sh /tmp/after
#   diff -r /tmp/before /tmp/after && echo unchanged
#
# About 4 seconds (no C++ compiler runs). Uses build/bin/stepc, or $STEPC_BIN.
set -euo pipefail
out=${1:?usage: scripts/emit_snapshot.sh DIR}
root=$(cd "$(dirname "$0")/.." && pwd)
stepc=${STEPC_BIN:-$root/build/bin}/stepc
rm -rf "$out" && mkdir -p "$out"
n=0
while read -r model flags; do
  n=$((n + 1))
  # (Relative paths: the sources' error sites name the model as given.)
  (cd "$root" &&
   "$stepc" "examples/$model/model.mlir" --emit=mlir $flags -o "$out/$n.mlir" &&
   "$stepc" "examples/$model/model.mlir" --emit=source $flags -o "$out/$n.src" \
     --report="$out/$n.json" --memory-plot="$out/$n.svg") > /dev/null 2>&1 ||
    echo "failed: $model $flags" > "$out/$n.failed"
done <<'LIST'
gpt-small --target=cpu
gpt-small --target=cpu --shard=fsdp:2
gpt-small --target=cpu --shard=tp:2
gpt-small --target=cpu --shard=pp:2 --micro-batches=2
gpt-small --target=cpu --shard=hsdp:2x2,pp:2
gpt-small --target=cpu --optimizer=muon
gpt-small --target=cpu --optimizer=lion --shard=ddp:2
gpt-small --target=cpu --precision=fp8
gpt-small --target=cpu --profile
gpt-small --target=cuda --precision=fp8 --shard=tp:2
gpt-small --target=cuda --profile
llama-debug --target=cpu --shard=pp:2,tp:2 --micro-batches=4
llama-debug --target=cpu --precision=bf16 --remat=block
gpt-capstone --target=cpu --shard=fsdp:2 --optimizer=sgd
gpt-capstone --target=cuda
gpt-capstone --target=cuda --precision=bf16 --remat=block
gpt-moe --target=cpu --shard=fsdp:2,ep:2
gpt-moe --target=cpu --shard=ep:2,pp:2 --micro-batches=2
gpt-moe --target=cuda --shard=ep:2
gpt-capstone --target=cpu
gpt-capstone --target=cpu --precision=bf16 --remat=selective
gpt-capstone --target=cpu --memory-budget=100MB
llama-debug --target=cpu --profile
llama-debug --target=cuda --precision=bf16 --shard=fsdp:2
gpt-small --target=cpu --micro-batches=4
gpt-small --target=cpu --shard=hsdp:2x2 --precision=bf16
gpt-capstone --target=cpu --shard=pp:4 --micro-batches=4 --pp-schedule=zero-bubble
gpt-capstone --target=cpu --shard=pp:2 --micro-batches=4 --pp-schedule=interleaved:2 --pp-stage=1
gpt-small --target=cuda --shard=fsdp:2,tp:2
mlp-classifier --target=cpu
mlp-classifier --target=cuda --shard=ddp:2
gpt-moe --target=cpu
gpt-d2l --target=cpu --shard=tp:2
llama-s --target=cpu --precision=bf16
gpt-small --target=cpu --shard=pp:2 --micro-batches=2 --pp-stage=1
gpt-small --target=cpu --shard=hsdp:2x2,pp:2 --pp-stage=1
llama-debug --target=cpu --shard=pp:2,tp:2 --micro-batches=4 --pp-stage=1
gpt-moe --target=cpu --shard=ep:2,pp:2 --micro-batches=2 --pp-stage=1
gpt-capstone --target=cpu --shard=pp:4 --micro-batches=4 --pp-schedule=zero-bubble --pp-stage=1
gpt-capstone --target=cpu --shard=pp:4 --micro-batches=4 --pp-schedule=zero-bubble --pp-stage=2
gpt-capstone --target=cpu --shard=pp:4 --micro-batches=4 --pp-schedule=zero-bubble --pp-stage=3
gpt-capstone --target=cpu --shard=pp:2 --micro-batches=4 --pp-schedule=interleaved:2
gpt-small --target=cuda --shard=pp:2 --micro-batches=2 --pp-stage=1
LIST
echo "emit_snapshot: $n configurations in $out"

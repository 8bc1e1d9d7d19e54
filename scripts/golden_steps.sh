#!/bin/bash
# Five training steps of the shipped models as .npy (plus reports and the
# block-remat source), to compare two builds bit for bit:
#   scripts/golden_steps.sh OLD/build/bin examples /tmp/old
#   scripts/golden_steps.sh build/bin examples /tmp/new
#   for d in cap capblock llama cudabf16 fsdp fsdp.rank1 tp tp.rank1; do
#     /usr/bin/python3 test/Runtime/compare_npy.py /tmp/old/$d.npy /tmp/new/$d.npy --exact; done
# (".rank1" dirs are named fsdp.npy.rank1 etc.). Not a test: OpenBLAS picks
# kernels per CPU, so results are bit-stable on one host, not across hosts.
set -e
BIN=$1; EX=$2; OUT=$3
rm -rf "$OUT"; mkdir -p "$OUT"
export OMP_NUM_THREADS=1
MPI="mpirun --allow-run-as-root --oversubscribe -x OMP_NUM_THREADS=1 --mca pml ob1 --mca btl self,vader --mca oob_tcp_if_include lo"
c() { name=$1; shift; "$BIN/stepc" "$@" -o "$OUT/$name.so" --report="$OUT/$name.json"; }
c cap --target=cpu "$EX/gpt-capstone/model.mlir"
c llama --target=cpu "$EX/llama-debug/model.mlir"
c fsdp --target=cpu "$EX/gpt-small/model.mlir" --shard=fsdp:2
c tp --target=cpu "$EX/gpt-small/model.mlir" --shard=tp:2
c cudabf16 "$EX/gpt-small/model.mlir" --cuda-emulation --precision=bf16
c capblock --target=cpu "$EX/gpt-capstone/model.mlir" --remat=block
"$BIN/stepc" --target=cpu "$EX/gpt-capstone/model.mlir" --remat=block --emit=source -o "$OUT/capblock.cpp"
for m in cap capblock llama cudabf16; do
  "$BIN/stepc-run" "$OUT/$m.so" --steps 5 --save-npy "$OUT/$m.npy" > "$OUT/$m.log"
done
for m in fsdp tp; do
  $MPI -np 2 "$BIN/stepc-run" "$OUT/$m.so" --steps 5 --save-npy "$OUT/$m.npy" > "$OUT/$m.log"
done
echo "golden_steps: $OUT"

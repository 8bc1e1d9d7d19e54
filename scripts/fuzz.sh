#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan + coverage) in
# build-fuzz and runs each for a bounded number of inputs, seeded with the
# repository's own models and data files. Exits 1 on any finding (a crash,
# a sanitizer report, a leak, a timeout), leaving the input under
# build-fuzz/findings/.
#
#   scripts/fuzz.sh [RUNS]     (default 1000000 inputs per target; CI: 20000)
# The seed is fixed (STEPC_FUZZ_SEED, default 1): a run is reproducible.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-1000000}
dir=${STEPC_FUZZ_DIR:-build-fuzz}
if [ ! -f "$dir/build.ninja" ]; then
  CC=clang CXX=clang++ cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTEPC_FUZZ=ON
fi
cmake --build "$dir" -j "${JOBS:-2}" --target fuzz_npy fuzz_token_data fuzz_mlir

# Seed corpora: the shipped and test models; small .npy and token files.
seeds="$dir/seeds"
rm -rf "$seeds" && mkdir -p "$seeds/mlir" "$seeds/npy" "$seeds/tokens"
find test -name '*.mlir' -size -24k -exec cp {} "$seeds/mlir/" \;
cp test/Transforms/Inputs/*.mlir "$seeds/mlir/"
# A final module's shape (block functions and their calls), split file by file.
awk -v out="$seeds/mlir/inline-blocks" '/^\/\/ -----/ { n++; next } { print > (out "-" n+0 ".mlir") }' \
  test/Compiler/step-inline-blocks.mlir
python3 - "$seeds" <<'PY'
import struct, sys, os
seeds = sys.argv[1]
def npy(path, descr, shape, payload):
    dims = "(" + "".join(f"{d}," for d in shape) + ")"
    header = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {dims}, }}"
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    open(path, "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + payload)
npy(f"{seeds}/npy/f4.npy", "<f4", (2, 3), struct.pack("<6f", *range(6)))
npy(f"{seeds}/npy/i4.npy", "<i4", (4,), struct.pack("<4i", 1, 2, 3, 4))
npy(f"{seeds}/npy/u2.npy", "<u2", (3,), struct.pack("<3H", 1, 2, 3))
npy(f"{seeds}/npy/scalar.npy", "<f8", (), struct.pack("<d", 1.5))
open(f"{seeds}/tokens/flat.bin", "wb").write(struct.pack("<64H", *range(64)))
header = [0] * 256
header[:3] = [20240520, 1, 40]
open(f"{seeds}/tokens/llmc.bin", "wb").write(struct.pack("<256i", *header) + struct.pack("<40H", *range(40)))
PY

findings="$dir/findings"
mkdir -p "$findings"
status=0
for target in fuzz_npy:npy fuzz_token_data:tokens fuzz_mlir:mlir; do
  name=${target%%:*}
  corpus=${target##*:}
  max_len=4096
  [ "$corpus" = mlir ] && max_len=16384
  echo "fuzz.sh: $name, $runs inputs"
  # allow_user_poisoning=0: LLVM headers inlined into our instrumented code
  # poison BumpPtrAllocator slabs that uninstrumented libMLIR then fills.
  if ! ASAN_OPTIONS=detect_leaks=1:allow_user_poisoning=0 "$dir/bin/$name" -runs="$runs" -max_len="$max_len" \
      -seed="${STEPC_FUZZ_SEED:-1}" -timeout=20 -rss_limit_mb=4096 -artifact_prefix="$findings/$name-" -print_final_stats=1 \
      "$seeds/$corpus" > "$dir/$name.log" 2>&1; then
    echo "fuzz.sh: $name found a failure (input under $findings/); the log:" >&2
    tail -40 "$dir/$name.log" >&2
    status=1
  else
    grep -E "^Done|stat::number_of_executed_units" "$dir/$name.log" | head -2
  fi
done
exit $status

#!/usr/bin/env bash
# Every check that needs a GPU, as one command for the machine lent to some
# issues (DEVELOPERS.md, `device`): builds, runs the ctest label `gpu`, and
# writes the results as JSON under $OUT (default build/gpu-check).
# Today: the NCCL communicator (all-reduce, all-gather, reduce-scatter on the
# visible GPUs). The CUDA back end's checks join when it lands.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-build/gpu-check}
mkdir -p "$out"
make build
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader > "$out/gpu.txt" || true
status=0
(cd build && ctest -L gpu --output-on-failure --output-junit "$PWD/../$out/gpu-tests.xml") \
  > "$out/gpu-tests.log" 2>&1 || status=$?
python3 - "$out" "$status" <<'PY'
import json, sys
out, status = sys.argv[1], int(sys.argv[2])
gpu = open(f"{out}/gpu.txt").read().strip() if status >= 0 else ""
json.dump({"gpu": gpu, "gpu_tests_passed": status == 0,
           "log": f"{out}/gpu-tests.log"}, open(f"{out}/gpu-check.json", "w"), indent=1)
print(open(f"{out}/gpu-check.json").read())
PY
exit $status

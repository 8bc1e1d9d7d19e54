#!/usr/bin/env python3
"""stepc-run's predicted step time is the report's counts at the printed
rates: executed FLOPs at the peak, memory-bound bytes at the copy rate.

    check_prediction.py LOG REPORT.json
"""
import json
import re
import sys

log, report = open(sys.argv[1]).read(), json.load(open(sys.argv[2]))
peak = float(re.search(r"peak ([0-9.]+) GFLOP/s per rank", log).group(1))
m = re.search(r"predicted step ([0-9.]+) ms per rank \(GEMMs ([0-9.]+) ms at the peak, "
              r"memory-bound kernels ([0-9.]+) ms at ([0-9.]+) GB/s", log)
total, gemm, memory, gbps = map(float, m.groups())
want_gemm = report["executed_flops_per_step"] / (peak * 1e9) * 1e3
want_memory = report["memory_bound_bytes_per_step"] / (gbps * 1e9) * 1e3
# The printed figures are rounded to 0.1 (ms, GFLOP/s, GB/s).
for name, got, want in (("GEMMs", gemm, want_gemm), ("memory", memory, want_memory)):
    if abs(got - want) > 0.05 + 0.002 * want:
        sys.exit(f"check_prediction: {name} {got} ms printed, {want:.3f} ms from the report")
if abs(total - (gemm + memory)) > 0.15:
    sys.exit(f"check_prediction: {total} ms is not {gemm} + {memory}")
if report["memory_bound_bytes_per_step"] <= 0:
    sys.exit("check_prediction: no memory-bound bytes in the report")
print(f"prediction matches the report: {gemm} ms of GEMMs + {memory} ms of memory-bound kernels")

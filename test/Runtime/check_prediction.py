#!/usr/bin/env python3
"""stepc-run's predicted step time is the report's counts at the printed
rates: every GEMM shape of the report timed (gemm_calls_by_shape), every
attention kernel's shape (attention_calls_by_shape), the memory-bound bytes
at the copy rate plus each memory-bound kernel call
(memory_bound_kernels_per_step) at the probed cost of a call, and their
sum.

    check_prediction.py LOG REPORT.json
"""
import json
import re
import sys

log, report = open(sys.argv[1]).read(), json.load(open(sys.argv[2]))
peak = float(re.search(r"peak ([0-9.]+) GFLOP/s per rank", log).group(1))
m = re.search(r"predicted step ([0-9.]+) ms per rank \(GEMMs and attention ([0-9.]+) ms at the "
              r"rates of their (\d+) \+ (\d+) shapes, memory-bound kernels ([0-9.]+) ms at "
              r"([0-9.]+) GB/s \([^)]*\) \+ ([0-9.]+) us for each of their (\d+) calls", log)
total, gemm, shapes, attention, memory, gbps = (float(m[1]), float(m[2]), int(m[3]), int(m[4]),
                                                float(m[5]), float(m[6]))
call_us, kernel_calls = float(m[7]), int(m[8])
if kernel_calls != report["memory_bound_kernels_per_step"] or kernel_calls == 0:
    sys.exit(f"check_prediction: {kernel_calls} memory-bound calls charged, the report has "
             f"{report['memory_bound_kernels_per_step']}")
if attention != len(report["attention_calls_by_shape"]) or attention == 0:
    sys.exit(f"check_prediction: {attention} attention shapes timed, the report has "
             f"{len(report['attention_calls_by_shape'])}")
if shapes != len(report["gemm_calls_by_shape"]) or shapes == 0:
    sys.exit(f"check_prediction: {shapes} GEMM shapes timed, the report has "
             f"{len(report['gemm_calls_by_shape'])}")
calls = sum(report["gemm_calls_by_shape"].values())
want_memory = (report["memory_bound_bytes_per_step"] / (gbps * 1e9) * 1e3 +
               kernel_calls * call_us * 1e-3)
# The printed figures are rounded to 0.1 (ms, GB/s, us).
if abs(memory - want_memory) > 0.05 + 0.005 * want_memory + kernel_calls * 0.05e-3:
    sys.exit(f"check_prediction: memory {memory} ms printed, {want_memory:.3f} ms from the report")
if abs(total - (gemm + memory)) > 0.15:
    sys.exit(f"check_prediction: {total} ms is not {gemm} + {memory}")
# No GEMM shape beats the 1024x1024x1024 peak by much: the GEMM part is at
# least the executed FLOPs at 1.5x the peak.
floor = report["executed_flops_per_step"] / (1.5 * peak * 1e9) * 1e3
if gemm < floor - 0.05:
    sys.exit(f"check_prediction: GEMMs {gemm} ms, below {floor:.3f} ms at 1.5x the peak")
if report["memory_bound_bytes_per_step"] <= 0:
    sys.exit("check_prediction: no memory-bound bytes in the report")
print(f"prediction matches the report: {calls} GEMM calls of {shapes} shapes in {gemm} ms "
      f"+ {memory} ms of memory-bound kernels")

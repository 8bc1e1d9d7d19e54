#!/usr/bin/env python3
"""Checks stepc-run's MFU against an independent computation.

    check_mfu.py METRICS.jsonl REPORT.json --world N [--peak-tflops T]

For every step line: model FLOPs (the compiler's report, per rank) × N
ranks × tokens_per_s / (tokens per step × N) — the FLOP/s of the step —
over N × the peak per rank (the metrics' peak_gflops_per_s, or
--peak-tflops) equals the line's `mfu` within 1%.
"""
import argparse
import json
import sys

p = argparse.ArgumentParser()
p.add_argument("metrics")
p.add_argument("report")
p.add_argument("--world", type=int, required=True)
p.add_argument("--peak-tflops", type=float)
a = p.parse_args()
report = json.load(open(a.report))
flops, tokens = report["model_flops_per_step"], report["tokens_per_step"]
worst, lines = 0.0, 0
for line in open(a.metrics):
    m = json.loads(line)
    if "step" not in m or "loss" not in m:
        continue
    peak = a.peak_tflops * 1e3 if a.peak_tflops else m["peak_gflops_per_s"]
    seconds = tokens * a.world / m["tokens_per_s"]
    expected = flops * a.world / seconds / 1e9 / (peak * a.world)
    worst = max(worst, abs(m["mfu"] - expected) / expected)
    lines += 1
if not lines or worst > 0.01:
    sys.exit(f"check_mfu: {lines} steps, worst relative difference {worst:.2e}")
print(f"mfu matches on {lines} steps (worst {worst:.1e})")

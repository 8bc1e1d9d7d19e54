#!/usr/bin/env python3
"""stepc-run's memory prediction and measurement agree with the report and
with each other.

    check_memory_prediction.py LOG REPORT.json SUMMARY.json

- Before step 1 the log predicts the plan + the libraries' probed
  workspace: every GEMM shape of the report run once, each collective kind
  once, and the report's in-flight peak set together.
- The summary's predicted peak is the plan + that workspace; the measured
  data above the baseline is at least the plan (its pages are all written:
  the arguments at initialisation, the arena by the step) and the ratio is
  measured over predicted; the end-of-run line prints the same figures.
"""
import json
import re
import sys

log, report, summary = (open(sys.argv[1]).read(), json.load(open(sys.argv[2])),
                        json.load(open(sys.argv[3])))
fail = lambda why: sys.exit(f"check_memory_prediction: {why}")

m = re.search(r"predicted memory ([0-9.]+) MB per rank \(the plan's ([0-9.]+) MB \+ the "
              r"libraries' workspace ([0-9.]+) MB: GEMM ([0-9.]+) MB on (\d+) shapes, "
              r"collectives ([0-9.]+) MB on (\d+) kinds(?: and (\d+) in flight together)?, "
              r"probed\)", log)
if not m:
    fail("no memory prediction line")
shapes, kinds = int(m[5]), int(m[7])
together = int(m[8]) if m[8] else 0
if shapes != len(report["gemm_calls_by_shape"]):
    fail(f"{shapes} GEMM shapes probed, the report has {len(report['gemm_calls_by_shape'])}")
if kinds != len(report["collective_bytes_per_step"]):
    fail(f"{kinds} collective kinds probed, the report has {report['collective_bytes_per_step']}")
if together != len(report["collectives_in_flight_peak"]):
    fail(f"{together} in flight probed, the report's peak has "
         f"{len(report['collectives_in_flight_peak'])}")

planned, workspace = summary["planned_peak_bytes"], summary["library_workspace_bytes"]
predicted, measured = summary["predicted_peak_bytes"], summary["measured_data_peak_bytes_above_baseline"]
if predicted != planned + workspace or workspace < 0:
    fail(f"predicted {predicted} != planned {planned} + workspace {workspace}")
if abs(float(m[1]) - predicted / 1e6) > 0.051 or abs(float(m[3]) - workspace / 1e6) > 0.051:
    fail(f"printed {m[1]} MB, {m[3]} MB; the summary {predicted}, {workspace}")
if measured < planned:
    fail(f"measured {measured} bytes of data, under the plan's {planned}: not the step's memory")
if abs(summary["memory_ratio"] - measured / predicted) > 1e-9:
    fail("memory_ratio is not measured over predicted")
if summary["library_code_bytes_paged_in"] < 0:
    fail("negative code paged in")
end = re.search(r"memory per rank: predicted ([0-9.]+) MB \(planned ([0-9.]+) MB \+ libraries "
                r"([0-9.]+) MB\), measured ([0-9.]+) MB of data above the process baseline "
                r"\(([0-9.]+)x; and ([0-9.]+) MB of library code paged in\)", log)
if not end or abs(float(end[1]) - predicted / 1e6) > 0.051 or abs(float(end[4]) - measured / 1e6) > 0.051:
    fail("the end-of-run memory line differs from the summary")
print(f"memory prediction consistent: {shapes} GEMM shapes, {kinds} collective kinds, "
      f"{together} in flight; workspace {workspace} bytes")

#!/usr/bin/env python3
"""stepc-run's communication prediction and measurement on a sharded CPU
step are consistent with the compiler's report and with each other.

    check_comm_prediction.py LOG REPORT.json SUMMARY.json RANKS

- The report's wire bytes per axes: with 2 ranks a ring all-gather or
  reduce-scatter sends its contribution once and an all-reduce its tensor
  once, so axis0's wire bytes equal the sum of collective_bytes_per_step.
- The printed prediction charges the report's collectives and wire bytes
  at the printed probe (latency, GB/s), and the summary's predicted step is
  GEMMs + memory-bound kernels + that communication.
- The summary's measured time in collectives is per rank (RANKS values),
  positive and below the step time; rank 0's is the one printed.
"""
import json
import re
import sys

log, report = open(sys.argv[1]).read(), json.load(open(sys.argv[2]))
summary, ranks = json.load(open(sys.argv[3])), int(sys.argv[4])
fail = lambda why: sys.exit(f"check_comm_prediction: {why}")

wire = report["collective_wire_bytes_by_axes"]
if ranks == 2 and wire["axis0"] != sum(report["collective_bytes_per_step"].values()):
    fail(f"wire bytes {wire['axis0']} != {report['collective_bytes_per_step']}")
m = re.search(r"predicted communication on axis0: ([0-9.]+) ms per step \((\d+) collectives, "
              r"([0-9.]+) MB on the wire per rank; link probed on (\d+) ranks: ([0-9.]+) GB/s "
              r"after ([0-9.]+) us\)", log)
if not m:
    fail("no prediction line")
ms, count, mb, probed, gbps, us = (float(m[1]), int(m[2]), float(m[3]), int(m[4]),
                                   float(m[5]), float(m[6]))
if count != report["collectives_by_axes"]["axis0"] or abs(mb - wire["axis0"] / 1e6) > 0.006:
    fail(f"{count} collectives, {mb} MB printed; the report: {report['collectives_by_axes']}, {wire}")
if probed != ranks:
    fail(f"probed on {probed} ranks, not {ranks}")
want = count * us * 1e-3 + wire["axis0"] / (gbps * 1e9) * 1e3
if abs(ms - want) > 0.06 + 0.02 * want:
    fail(f"{ms} ms printed, {want:.3f} from the printed probe")
p = summary["predicted"]
if abs(summary["predicted_step_seconds"] -
       (p["gemm_seconds"] + p["memory_bound_seconds"] + p["communication_seconds"])) > 1e-9:
    fail("the predicted step is not the sum of its parts")
axis = summary["predicted_collective_seconds_by_axes"]["axis0"]
if abs(axis["seconds"] - p["communication_seconds"]) > 1e-12:
    fail("the step's communication is not axis0's")
by_rank = summary["collective_seconds_median_by_rank"]
# Each rank waits some time; rank 0's (the rank whose step time is the
# summary's) is within its step. Another rank's median may exceed rank 0's
# step median on a loaded machine (it waits while rank 0 computes).
if (len(by_rank) != ranks or not all(s > 0 for s in by_rank) or
        not by_rank[0] < summary["step_seconds_median"]):
    fail(f"time in collectives by rank {by_rank}, step {summary['step_seconds_median']}")
if abs(summary["collective_seconds_median"] - by_rank[0]) > 1e-6:
    fail("rank 0's time in collectives differs between the summary's two fields")
if f"least of the ranks {1e3 * min(by_rank):.1f} ms" not in log:
    fail("the least time in collectives is not the one printed")
print(f"communication prediction consistent: {count} collectives, {mb} MB at {gbps} GB/s after "
      f"{us} us; measured {ranks} ranks")

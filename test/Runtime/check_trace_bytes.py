#!/usr/bin/env python3
"""The report's all-to-all bytes a step (collective_bytes_per_step), and,
given a --trace of one step, whether the all-to-alls rank 0 issued in it
sent exactly that many.

    check_trace_bytes.py REPORT.json [TRACE.json]
"""
import json
import sys

report = json.load(open(sys.argv[1]))
predicted = report["collective_bytes_per_step"]["all_to_all"]
if len(sys.argv) < 3:
    print(f"all_to_all {predicted} bytes a step")
    sys.exit(0)
trace = json.load(open(sys.argv[2]))
events = trace["traceEvents"] if isinstance(trace, dict) else trace
sent = [e["args"] for e in events
        if e.get("cat") == "collective" and e.get("ph") == "b"
        and e.get("name", "").startswith("all_to_all")]
steps = {a["step"] for a in sent}
if len(steps) != 1:
    sys.exit(f"FAIL: the trace holds the all-to-alls of steps {sorted(steps)}, not one")
traced = sum(a["bytes_per_rank"] for a in sent)
if traced != predicted:
    sys.exit(f"FAIL: the report predicts {predicted} bytes, the step sent {traced}")
print(f"ok: all_to_all {predicted} bytes a step, as traced on rank 0 ({len(sent)} calls)")

"""Two metrics files of the same run agree on everything but timings: each
step's loss, learning rate and gradient norm, each evaluation's loss."""
import json
import sys

TIMED = {"tokens_per_s", "samples_per_s", "gflops_per_s", "measured_peak_bytes",
         "baseline_bytes", "mfu"}


def records(path):
    return [{k: v for k, v in json.loads(line).items() if k not in TIMED}
            for line in open(path) if line.strip()]


a, b = records(sys.argv[1]), records(sys.argv[2])
if a != b:
    for x, y in zip(a, b):
        if x != y:
            sys.exit(f"metrics differ: {x} vs {y}")
    sys.exit(f"metrics differ in length: {len(a)} vs {len(b)}")
steps = sum("loss" in r and "val_loss" not in r for r in a)
evals = sum("val_loss" in r for r in a)
print(f"metrics agree: {steps} steps, {evals} evaluations")

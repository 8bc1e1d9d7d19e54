#!/usr/bin/env python3
"""Pipeline schedules: each rank's measured idle fraction against the
compiler's prediction, and the step time, per schedule and micro-batch count.

    bench/pipeline/bubble.py [--ranks 2] [--micro-batches 4,8]
        [--schedules gpipe,1f1b,interleaved:2,zero-bubble] [--steps 8]
        [--layers 8] [--dim 128] [--seq 128] [--batch 16]

For each (schedule, M), compiles a GPT of --layers blocks with
`stepc --target=cpu --shard=pp:P --pp-schedule=S --micro-batches=M`, runs it
under mpirun with one thread per rank (`stepc-run --summary`), and prints
per rank the measured idle fraction (the median step's time spent waiting
for transfers and collectives over the median step time) beside the
predicted one (the schedule simulated on the stages' predicted costs, from
the report's `pipeline` entry), their mean (the bubble), the step time, and
the same step's time on one rank of one thread over it (the speedup).
A benchmark, not a test: the goal (issue 28) is the prediction within 25%
of the measurement for 1F1B and interleaved at two values of M, and
interleaved and zero-bubble idling less than 1F1B where predicted. Run it
with no other load: P ranks need P free cores.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
p = argparse.ArgumentParser()
p.add_argument("--ranks", type=int, default=2)
p.add_argument("--micro-batches", default="4,8")
p.add_argument("--schedules", default="gpipe,1f1b,interleaved:2,zero-bubble")
p.add_argument("--steps", type=int, default=8)
p.add_argument("--layers", type=int, default=8)
p.add_argument("--dim", type=int, default=128)
p.add_argument("--seq", type=int, default=128)
p.add_argument("--batch", type=int, default=16)
p.add_argument("--bin", default=os.path.join(root, "build/bin"))
args = p.parse_args()

mpirun = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-x", "OMP_NUM_THREADS=1",
          "-np", str(args.ranks)]
rows, one = [], {}
with tempfile.TemporaryDirectory() as tmp:
    model = os.path.join(tmp, "model.mlir")
    subprocess.run([sys.executable, os.path.join(root, "examples/gen_model.py"), "--arch", "gpt",
                    "--vocab", "512", "--seq", str(args.seq), "--dim", str(args.dim),
                    "--layers", str(args.layers), "--heads", "4", "--batch", str(args.batch),
                    "-o", model], check=True)
    for m in (int(x) for x in args.micro_batches.split(",")):
        # The same step on one rank (one thread): the pipeline's speedup.
        so, summary = os.path.join(tmp, f"one-m{m}.so"), os.path.join(tmp, f"one-m{m}.json")
        subprocess.run([os.path.join(args.bin, "stepc"), "--target=cpu", model,
                        f"--micro-batches={m}", "-o", so], check=True)
        subprocess.run([os.path.join(args.bin, "stepc-run"), so, "--steps", str(args.steps),
                        "--summary", summary], check=True, stdout=subprocess.DEVNULL,
                       env=dict(os.environ, OMP_NUM_THREADS="1"))
        one[m] = json.load(open(summary))["step_seconds_median"]
        for schedule in args.schedules.split(","):
            tag = f"{schedule.replace(':', '')}-m{m}"
            so, summary = os.path.join(tmp, tag + ".so"), os.path.join(tmp, tag + ".json")
            built = subprocess.run(
                [os.path.join(args.bin, "stepc"), "--target=cpu", model,
                 f"--shard=pp:{args.ranks}", f"--pp-schedule={schedule}",
                 f"--micro-batches={m}", "-o", so], capture_output=True, text=True)
            if built.returncode != 0:
                print(f"{schedule} M={m}: {built.stderr.strip().splitlines()[-1]}")
                continue
            subprocess.run(mpirun + [os.path.join(args.bin, "stepc-run"), so, "--steps",
                                     str(args.steps), "--summary", summary],
                           check=True, stdout=subprocess.DEVNULL)
            s = json.load(open(summary))
            pipe = s["pipeline"]
            rows.append((schedule, m, pipe["measured_idle_fraction"],
                         pipe["predicted_idle_fraction"], s["step_seconds_median"]))

print(f"{'schedule':>14} {'M':>3}  {'measured idle per rank':>28}  "
      f"{'predicted':>24}  {'bubble meas/pred':>17}  {'step ms':>8}  {'vs one rank':>11}")
for schedule, m, measured, predicted, seconds in rows:
    mean = lambda v: sum(v) / len(v)
    fmt = lambda v: " ".join(f"{100 * x:5.1f}%" for x in v)
    print(f"{schedule:>14} {m:>3}  {fmt(measured):>28}  {fmt(predicted):>24}  "
          f"{100 * mean(measured):6.1f}%/{100 * mean(predicted):5.1f}%  {1e3 * seconds:8.1f}  "
          f"{one[m] / seconds:10.2f}x")
for m, seconds in one.items():
    print(f"one rank, one thread, M={m}: {1e3 * seconds:.1f} ms a step")

#!/usr/bin/env python3
"""Mutation check: stepc-opt on broken inputs reports errors, never crashes.

Takes .mlir files (lit inputs, shipped models), applies seeded random
mutations (truncation, token deletion/duplication/swap, numbers replaced by
0, -1 or huge values, element types and keywords swapped), and runs
`stepc-opt` on each. A run passes if it exits 0, or exits 1 having printed a
`file:line:col: error:` diagnostic. A signal, any other exit code, a silent
failure or a timeout is a crash and is written to --crash-dir.
"""

import argparse
import os
import random
import re
import subprocess
import sys

TOKEN = re.compile(r"%[\w.$-]+|#?[\w.]+|\d+(?:\.\d+)?(?:e-?\d+)?|[^\s\w]")
SWAPS = {
    "f32": ["i32", "bf16", "f64", "index"], "i32": ["f32", "i1"], "bf16": ["f32"],
    "transpose_b": ["transpose_a", ""], "causal": [""], "heads": ["kv_heads"],
    "step.matmul": ["step.batch_matmul", "step.add"], "step.add": ["step.concat", "step.mul"],
    "step.layer_norm": ["step.rms_norm"], "step.attention": ["step.rotary"],
    "normal": ["zeros", "scaled_normal"], "step.param": ["step.input"],
}
NUMBERS = ["0", "-1", "1", "3", "99999999999999999999", "-9223372036854775808", "2147483648"]


def mutate(text, rng):
    kind = rng.randrange(7)
    if kind == 0:  # truncate
        return text[: rng.randrange(len(text))]
    tokens = list(TOKEN.finditer(text))
    if not tokens:
        return text
    t = rng.choice(tokens)
    start, end, word = t.start(), t.end(), t.group()
    if kind == 1:  # delete a token
        return text[:start] + text[end:]
    if kind == 2:  # duplicate a token
        return text[:end] + " " + word + text[end:]
    if kind == 3:  # swap two tokens
        u = rng.choice(tokens)
        if u.start() < start:
            t, u = u, t
        a, b = t, u
        if a.end() > b.start():
            return text
        return text[: a.start()] + b.group() + text[a.end(): b.start()] + a.group() + text[b.end():]
    if kind == 4:  # replace a number
        numbers = [m for m in tokens if m.group()[0].isdigit()]
        if not numbers:
            return text
        n = rng.choice(numbers)
        return text[: n.start()] + rng.choice(NUMBERS) + text[n.end():]
    if kind == 5:  # swap a known keyword or type
        known = [m for m in tokens if m.group() in SWAPS]
        if not known:
            return text
        k = rng.choice(known)
        return text[: k.start()] + rng.choice(SWAPS[k.group()]) + text[k.end():]
    # kind 6: duplicate or drop a line
    lines = text.split("\n")
    i = rng.randrange(len(lines))
    if rng.random() < 0.5:
        lines.insert(i, lines[i])
    else:
        del lines[i]
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("inputs", nargs="+")
    p.add_argument("--stepc-opt", default="stepc-opt")
    p.add_argument("--count", type=int, default=300, help="mutations in all")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--work-dir", required=True)
    p.add_argument("--crash-dir", help="where crashing inputs are kept (default: work dir)")
    p.add_argument("--extra-args", default="--step-report",
                   help="stepc-opt arguments besides the input")
    args = p.parse_args()
    rng = random.Random(args.seed)
    sources = [(path, open(path).read()) for path in args.inputs]
    os.makedirs(args.work_dir, exist_ok=True)
    crash_dir = args.crash_dir or args.work_dir
    crashes = errors = 0
    for i in range(args.count):
        path, text = sources[i % len(sources)]
        mutated = text
        for _ in range(rng.randint(1, 3)):
            mutated = mutate(mutated, rng)
        case = os.path.join(args.work_dir, f"case{i}.mlir")
        with open(case, "w") as f:
            f.write(mutated)
        cmd = [args.stepc_opt, case, "-o", os.devnull] + args.extra_args.split()
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
            stderr = r.stderr
            diagnosed = re.search(re.escape(case) + r":\d+:\d+: error:", stderr)
            ok = r.returncode == 0 or (r.returncode == 1 and diagnosed)
            why = f"exit {r.returncode}" + ("" if diagnosed else ", no located diagnostic")
            errors += r.returncode == 1
        except subprocess.TimeoutExpired:
            ok, why, stderr = False, "timeout", ""
        if not ok:
            crashes += 1
            keep = os.path.join(crash_dir, f"crash{i}.mlir")
            with open(keep, "w") as f:
                f.write(mutated)
            print(f"CRASH ({why}) on a mutation of {path}: {keep}\n{stderr[-2000:]}")
        else:
            os.remove(case)
    print(f"{args.count} mutations, {errors} rejected with a diagnostic, {crashes} crashes")
    return 1 if crashes else 0


if __name__ == "__main__":
    sys.exit(main())

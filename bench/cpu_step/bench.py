#!/usr/bin/env python3
"""bench/cpu_step: stepc's CPU training step against PyTorch on the same model.

    /usr/bin/python3 bench/cpu_step/bench.py [--preset gpt-capstone] [--steps 15]
        [--precision fp32|bf16]

One run, one machine, the same thread count (all cores): the median time of
a full step (forward, backward, global-norm clip, AdamW) for the stepc
step.so (stepc-run, embedded corpus) and for the same model in PyTorch
(scripts/torch_check.py's definition, torch.optim.AdamW), and the machine's
OpenBLAS sgemm rate (bench_sgemm, 1024³) and that of the f32 GEMM the step
calls (bench_gemm --dtype=f32: oneDNN on most CPUs, on some twice OpenBLAS's
rate). Where bench/setup-peers.sh has made bench/.peers, also PyTorch 2.x
eager (SDPA attention), torch.compile and JAX (bench/cpu_step/peers.py, run
in that environment). Prints one JSON object with the ratios: speedup over
each peer, stepc's GFLOP/s as a fraction of sgemm (the roofline) and of the
step's own f32 GEMM, and, from a `stepc --profile` build of the same step,
the time, GB/s and GFLOP/s of each kernel kind, the GB/s against
the machine's stream bandwidth (bench_stream). With --precision=bf16 the
step is `stepc --precision=bf16`, measured beside stepc's fp32 step, and
every PyTorch contender also runs under torch.autocast("cpu", bfloat16)
(fp32 master weights, as ours); the roofline adds the bf16 GEMM the step
calls (bench_gemm, 1024³), and `speedup_vs_fastest_torch` compares
with the fastest PyTorch configuration of each round, fp32 or autocast,
eager or compiled. A benchmark, not a test: nothing here asserts a time.
"""

import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
sys.path.insert(0, os.path.join(ROOT, "examples"))
import gen_model  # noqa: E402
import torch_check  # noqa: E402


def stepc_step_seconds(bindir, so, steps):
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "m.jsonl")
        subprocess.run([os.path.join(bindir, "stepc-run"), so, f"--steps={steps}",
                        f"--metrics={metrics}", f"--log-every={steps}"], check=True,
                       capture_output=True)
        rows = [json.loads(line) for line in open(metrics)]
    times = [1.0 / r["tokens_per_s"] for r in rows[2:]]  # seconds per token; 2 warm-up steps
    return times


def gemm_gflops(bindir, dtype):
    """The rate of the GEMM kernel a step of this dtype calls (1024³)."""
    return json.loads(subprocess.run([os.path.join(bindir, "bench_gemm"), f"--dtype={dtype}"],
                                     check=True, capture_output=True, text=True).stdout)["gflops"]


def stepc_profile(bindir, model, steps, cpu, precision):
    """Each kernel kind's share of a step, from a `stepc --profile` build."""
    with tempfile.TemporaryDirectory() as tmp:
        so, table = os.path.join(tmp, "step.so"), os.path.join(tmp, "profile.json")
        subprocess.run([os.path.join(bindir, "stepc"), model, "-o", so, "--target=cpu",
                        f"--cpu={cpu}", "--profile", f"--precision={precision}"], check=True)
        subprocess.run([os.path.join(bindir, "stepc-run"), so, f"--steps={steps}",
                        f"--log-every={steps}"], check=True, capture_output=True,
                       env=dict(os.environ, STEPC_PROFILE=table))
        return json.load(open(table))


def breakdown(profile, stream_gbps):
    steps = profile["steps"]
    rows = []
    for k in profile["kernels"]:
        s = k["seconds"] / steps
        rows.append({"kind": k["kind"], "ms": round(s * 1e3, 2),
                     "calls": k["calls_per_step"],
                     "gbps": round(k["bytes_per_step"] / s / 1e9, 1) if s > 0 else None,
                     "gflops": round(k["flops_per_step"] / s / 1e9, 1)
                     if s > 0 and k["flops_per_step"] else None})
    total = sum(r["ms"] for r in rows)
    for r in rows:
        r["share"] = round(r["ms"] / total, 3) if total else 0
        if r["gbps"] is not None and not r["gflops"]:
            r["of_stream"] = round(r["gbps"] / stream_gbps, 2)
    return sorted(rows, key=lambda r: -r["ms"])


def failure(returncode):
    """Why a contender's process ended without a result."""
    if returncode == -9:
        return "failed: killed (SIGKILL: out of memory on this machine?)"
    return f"failed: exit status {returncode}"


def peer_seconds(preset, steps, threads, autocast=False):
    """PyTorch 2.x eager, torch.compile and JAX from bench/.peers, if made
    (PyTorch only under autocast): each in a process of its own, so one
    running out of memory is a failure in the table, not the end of the
    benchmark."""
    python = os.path.join(ROOT, "bench", ".peers", "bin", "python")
    if not os.path.exists(python):
        return {"missing": "bench/.peers (run bench/setup-peers.sh)"}
    result = {}
    for peer in ("torch", "torch.compile") if autocast else ("torch", "torch.compile", "jax"):
        out = subprocess.run([python, os.path.join(HERE, "peers.py"), "--preset", preset,
                              f"--steps={steps}", f"--threads={threads}", f"--peers={peer}"] +
                             (["--autocast"] if autocast else []),
                             stdout=subprocess.PIPE, text=True)
        name = peer + ("_autocast" if autocast else "")
        result[name] = json.loads(out.stdout)[peer] if out.returncode == 0 else failure(
            out.returncode)
    return result


def isolated(fn, *args):
    """fn(*args) in a forked child (torch is imported, never run, in this
    process): its result, or why the child died."""
    ctx = multiprocessing.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)

    def child():
        try:
            send.send(("ok", fn(*args)))
        except Exception as e:  # noqa: BLE001 - reported as the contender's failure
            send.send(("error", f"failed: {e!r}"))

    process = ctx.Process(target=child)
    process.start()
    send.close()
    try:
        status, value = receive.recv()
    except EOFError:
        status, value = "error", None
    process.join()
    return value if status == "ok" else value or failure(process.exitcode)


def torch_step_seconds(a, shapes, steps, threads, autocast=False):
    torch.set_num_threads(threads)
    rng = np.random.default_rng(0)
    params, tokens, targets = torch_check.draw(shapes, a, rng)
    p = {n: torch.tensor(params[n], requires_grad=True) for n, _ in shapes}
    decay = [p[n] for n, s in shapes if len(s) >= 2]
    no_decay = [p[n] for n, s in shapes if len(s) < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.95), eps=1e-8)
    loss_fn = torch_check.gpt_loss if a.arch == "gpt" else torch_check.llama_loss
    tok = torch.tensor(tokens, dtype=torch.long)
    tgt = torch.tensor(targets, dtype=torch.long)
    times = []
    for s in range(steps):
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = loss_fn(a, p, tok, tgt).float()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(p.values()), 1.0)
        opt.step()
        if s >= 2:
            times.append(time.perf_counter() - start)
    return times


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default="gpt-capstone")
    ap.add_argument("--steps", type=int, default=15)
    ap.add_argument("--bindir", default=os.path.join(ROOT, "build", "bin"))
    # The peers (PyTorch) use this machine's ISA; so does stepc by default here.
    ap.add_argument("--cpu", default="native", help="stepc --cpu: native or x86-64-v3")
    ap.add_argument("--no-profile", action="store_true", help="skip the kernel breakdown")
    ap.add_argument("--no-peers", action="store_true", help="skip bench/.peers")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of every contender in turn")
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    args = ap.parse_args()
    bf16 = args.precision == "bf16"
    threads = os.cpu_count()
    a, text = gen_model.generate(["--preset", args.preset])
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "model.mlir")
        open(model, "w").write(text)
        report = json.loads(subprocess.run(
            [os.path.join(args.bindir, "stepc-opt"), "--step-report", model, "-o", os.devnull],
            check=True, capture_output=True, text=True).stdout)
        so, so_fp32 = os.path.join(tmp, "step.so"), os.path.join(tmp, "step-fp32.so")
        for out, precision in ((so, args.precision), (so_fp32, "fp32")) if bf16 else ((so, "fp32"),):
            subprocess.run([os.path.join(args.bindir, "stepc"), model, "-o", out, "--target=cpu",
                            f"--cpu={args.cpu}", f"--precision={precision}"], check=True)
        profile = None if args.no_profile else stepc_profile(args.bindir, model, args.steps,
                                                             args.cpu, args.precision)
        tokens = report["tokens_per_step"]
        flops = report["model_flops_per_step"]
        # Rounds, each running every contender once in turn: a ratio is taken
        # within a round (minutes apart at most), then the median over rounds.
        rounds = []
        for r in range(args.rounds):
            row = {"stepc": statistics.median(stepc_step_seconds(args.bindir, so, args.steps))
                   * tokens}
            times = isolated(torch_step_seconds, a, torch_check.param_shapes(text),
                             args.steps, threads)
            row["torch"] = statistics.median(times) if isinstance(times, list) else times
            row["sgemm_gflops"] = json.loads(subprocess.run(
                [os.path.join(args.bindir, "bench_sgemm")], check=True, capture_output=True,
                text=True).stdout)["gflops"]
            row["f32_gemm_gflops"] = gemm_gflops(args.bindir, "f32")
            if bf16:
                row["stepc_fp32"] = statistics.median(
                    stepc_step_seconds(args.bindir, so_fp32, args.steps)) * tokens
                times = isolated(torch_step_seconds, a, torch_check.param_shapes(text),
                                 args.steps, threads, True)
                row["torch_autocast"] = statistics.median(times) if isinstance(times, list) \
                    else times
                row["bf16_gemm_gflops"] = gemm_gflops(args.bindir, "bf16")
            peers = {} if args.no_peers else peer_seconds(args.preset, args.steps, threads)
            if bf16 and not args.no_peers:
                peers.update(peer_seconds(args.preset, args.steps, threads, autocast=True))
            for name, peer in peers.items():
                key = "peer_" + name.replace(".", "_")
                row[key] = peer.get("step_s", peer) if isinstance(peer, dict) else peer
            rounds.append(row)
            print(f"bench: round {r + 1}/{args.rounds}: " +
                  ", ".join(f"{k} {v * 1e3:.1f} ms" if isinstance(v, float) and "gflops" not in k
                            else f"{k} {v}" for k, v in row.items()), file=sys.stderr)
    median = lambda key: statistics.median(row[key] for row in rounds)
    ratio = lambda num, den: statistics.median(row[num] / row[den] for row in rounds)
    torch_ok = all(isinstance(row["torch"], float) for row in rounds)
    stepc_s, sgemm = median("stepc"), median("sgemm_gflops")
    torch_s = median("torch") if torch_ok else None
    stepc_gflops = flops / stepc_s / 1e9
    stream = json.loads(subprocess.run([os.path.join(args.bindir, "bench_stream")], check=True,
                                       capture_output=True, text=True).stdout)
    result = {
        "model": args.preset, "threads": threads, "tokens_per_step": tokens,
        "model_flops_per_step": flops, "rounds": args.rounds,
        "stepc_step_ms": round(stepc_s * 1e3, 1),
        "stepc_gflops": round(stepc_gflops, 1),
        "sgemm_gflops": sgemm,
        "fraction_of_sgemm": round(statistics.median(
            flops / row["stepc"] / 1e9 / row["sgemm_gflops"] for row in rounds), 3),
        "torch_version": torch.__version__,
        "roofline_ms": round(flops / (sgemm * 1e9) * 1e3, 1),
        # The fp32 step against the f32 GEMM it calls (a fairer roofline where
        # oneDNN outruns OpenBLAS).
        "f32_gemm_gflops": median("f32_gemm_gflops"),
        "fraction_of_f32_gemm": round(statistics.median(
            flops / row["stepc_fp32" if bf16 else "stepc"] / 1e9 / row["f32_gemm_gflops"]
            for row in rounds), 3),
        "stream_triad_gbps": stream["triad_gbps"],
    }
    if torch_ok:
        result.update({"torch_step_ms": round(torch_s * 1e3, 1),
                       "speedup_vs_torch": round(ratio("torch", "stepc"), 2),
                       "torch_gflops": round(flops / torch_s / 1e9, 1)})
    else:
        result["torch"] = next(row["torch"] for row in rounds if isinstance(row["torch"], str))
    # The peers' figures under their own names ("peer_torch" is PyTorch 2.x
    # eager with SDPA, beside the system PyTorch above).
    for key in rounds[0]:
        if not key.startswith("peer_"):
            continue
        if all(isinstance(row[key], float) for row in rounds):
            result[f"{key}_step_ms"] = round(median(key) * 1e3, 1)
            result[f"speedup_vs_{key}"] = round(ratio(key, "stepc"), 2)
        else:
            result[key] = rounds[0][key]
    if bf16:
        result.update({
            "precision": "bf16",
            "stepc_fp32_step_ms": round(median("stepc_fp32") * 1e3, 1),
            "bf16_speedup_vs_stepc_fp32": round(ratio("stepc_fp32", "stepc"), 2),
            "bf16_gemm_gflops": median("bf16_gemm_gflops"),
            "fraction_of_bf16_gemm": round(statistics.median(
                flops / row["stepc"] / 1e9 / row["bf16_gemm_gflops"] for row in rounds), 3),
        })
        if all(isinstance(row["torch_autocast"], float) for row in rounds):
            result["torch_autocast_step_ms"] = round(median("torch_autocast") * 1e3, 1)
    # The fastest PyTorch configuration of each round (fp32 or autocast, eager
    # or compiled, either version), against stepc in the same round.
    torch_keys = [k for k in rounds[0] if k.startswith(("torch", "peer_torch"))]
    fastest = [min((row[k] for k in torch_keys if isinstance(row[k], float)), default=None)
               for row in rounds]
    if all(f is not None for f in fastest):
        result["speedup_vs_fastest_torch"] = round(statistics.median(
            f / row["stepc"] for f, row in zip(fastest, rounds)), 2)
    if profile:
        result["kernels"] = breakdown(profile, stream["triad_gbps"])
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

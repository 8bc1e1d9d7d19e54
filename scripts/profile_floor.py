#!/usr/bin/env python3
"""Where a step's time goes against what the hardware allows, per kernel kind.

    profile_floor.py PROFILE.json [--device h200|h100|NAME] [--peak-tflops F]
                     [--bandwidth-gbs B] [--json OUT.json]

PROFILE.json is what `STEPC_PROFILE=FILE stepc-run STEP.so --trace ...`
writes for a `stepc --profile` build (docs/observability.md): per kernel
kind, calls, bytes and FLOPs per step and the seconds over the traced
steps. Each kind's floor is the larger of its FLOPs at the dense peak and
its bytes at the memory bandwidth; measured / floor says how far from it
the kernels run (1.0 is the roofline). Printed largest time first;
--json writes the same rows (scripts/gpu_check.py puts them in its record).
stepc-run prints the same table itself at the end of a run with
STEPC_PROFILE set (runtime/train/profile_floor.cc).
"""
import argparse
import json
import sys

# Dense bf16 tensor-core peak (TFLOP/s) and HBM bandwidth (GB/s), datasheet.
DEVICES = {
    "h100": (989.0, 3350.0),  # H100 SXM5 80 GB, HBM3
    "h200": (989.0, 4800.0),  # H200 SXM 141 GB, HBM3e
}


def device_numbers(name):
    """(peak TFLOP/s, GB/s) of a device named like nvidia-smi's 'NVIDIA H200'."""
    lower = (name or "").lower()
    for key, numbers in DEVICES.items():
        if key in lower:
            return numbers
    return None


def rows(profile, peak_tflops, bandwidth_gbs):
    steps = max(1, int(profile.get("steps", 1)))
    out = []
    for k in profile.get("kernels", []):
        seconds = float(k["seconds"]) / steps
        flops, nbytes = float(k.get("flops_per_step", 0)), float(k.get("bytes_per_step", 0))
        floor = max(flops / (peak_tflops * 1e12), nbytes / (bandwidth_gbs * 1e9))
        out.append({"kind": k["kind"], "calls_per_step": k["calls_per_step"],
                    "ms_per_step": seconds * 1e3, "floor_ms": floor * 1e3,
                    "measured_over_floor": seconds / floor if floor > 0 else None,
                    "tflops": flops / seconds / 1e12 if seconds > 0 and flops else None,
                    "gbs": nbytes / seconds / 1e9 if seconds > 0 and nbytes else None})
    out.sort(key=lambda r: -r["ms_per_step"])
    return out


def table(rs):
    total = sum(r["ms_per_step"] for r in rs)
    lines = [f"{'kind':<34} {'calls':>6} {'ms/step':>9} {'share':>6} {'floor ms':>9} "
             f"{'x floor':>8} {'TFLOP/s':>8} {'GB/s':>7}"]
    for r in rs:
        ratio = r["measured_over_floor"]
        lines.append(f"{r['kind'][:34]:<34} {r['calls_per_step']:>6} {r['ms_per_step']:>9.3f} "
                     f"{r['ms_per_step'] / total if total else 0:>6.1%} {r['floor_ms']:>9.3f} "
                     f"{ratio if ratio is not None else float('nan'):>8.1f} "
                     f"{r['tflops'] or 0:>8.1f} {r['gbs'] or 0:>7.0f}")
    floor = sum(r["floor_ms"] for r in rs)
    lines.append(f"{'total':<34} {'':>6} {total:>9.3f} {'':>6} {floor:>9.3f} "
                 f"{total / floor if floor else float('nan'):>8.1f}")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("profile")
    p.add_argument("--device", default="h200")
    p.add_argument("--peak-tflops", type=float)
    p.add_argument("--bandwidth-gbs", type=float)
    p.add_argument("--json")
    a = p.parse_args()
    numbers = device_numbers(a.device) or DEVICES["h200"]
    peak = a.peak_tflops or numbers[0]
    bandwidth = a.bandwidth_gbs or numbers[1]
    with open(a.profile) as f:
        rs = rows(json.load(f), peak, bandwidth)
    print(f"floors at {peak:g} TFLOP/s and {bandwidth:g} GB/s")
    print(table(rs))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"peak_tflops": peak, "bandwidth_gbs": bandwidth, "kinds": rs}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

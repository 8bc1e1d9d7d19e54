#!/usr/bin/env python3
"""step.round_fp8 against a reference written here from the formats'
definitions (OCP 8-bit floats: E4M3FN and E5M2), bit for bit.

    check_fp8.py --interp stepc-interp --work DIR

The reference decodes every one of the 256 bit patterns of a format, and
rounds an input to the nearest finite value among them, a tie to the one
whose mantissa's last bit is 0, |x| at or past the largest finite value
(and ±inf) to ±largest, NaN to NaN, ±0 to ±0 (no arithmetic shared with
stepc's helper). The inputs: every finite value of the format with both
signs, every midpoint between neighbours and the floats just either side
of it, the region below the smallest subnormal, values past the largest,
±inf, NaN, and 20,000 random floats spread over 2^-30 .. 2^20. The
interpreter evaluates the op (in double, as stepc_round_fp8<double>;
elementwise_math_test checks the float instantiation the back ends run
equals it).
"""
import argparse
import os
import subprocess
import sys

import numpy as np

FORMATS = {"e4m3": (4, 3, 7), "e5m2": (5, 2, 15)}


def finite_values(name):
    """(value, mantissa's last bit) of every finite non-negative pattern."""
    exp_bits, man_bits, bias = FORMATS[name]
    out = []
    for bits in range(1 << (exp_bits + man_bits)):  # sign 0
        e, m = bits >> man_bits, bits & ((1 << man_bits) - 1)
        if name == "e4m3" and e == 15 and m == 7:
            continue  # NaN (E4M3FN: no infinity)
        if name == "e5m2" and e == 31:
            continue  # inf and NaN
        if e == 0:
            value = m / (1 << man_bits) * 2.0 ** (1 - bias)
        else:
            value = (1 + m / (1 << man_bits)) * 2.0 ** (e - bias)
        out.append((value, m & 1))
    return sorted(set(out))


def reference(x, name):
    table = finite_values(name)
    values = np.array([v for v, _ in table])
    odd = np.array([o for _, o in table])
    largest = values[-1]
    out = np.empty_like(x, dtype=np.float64)
    for i, v in enumerate(x.astype(np.float64)):
        if np.isnan(v):
            out[i] = np.nan
            continue
        a = abs(v)
        if a >= largest:
            r = largest
        else:
            hi = int(np.searchsorted(values, a))  # values[hi-1] <= a <= values[hi]
            lo = hi - 1 if values[hi] != a else hi
            dl, dh = a - values[lo], values[hi] - a
            r = values[lo] if dl < dh or (dl == dh and odd[lo] == 0) else values[hi]
        out[i] = np.copysign(r, v)
    return out.astype(np.float32)


def inputs(name):
    values = np.array([v for v, _ in finite_values(name)])
    mids = (values[:-1] + values[1:]) / 2
    f32 = np.float32
    around = np.concatenate([np.nextafter(mids.astype(f32), f32(0)),
                             np.nextafter(mids.astype(f32), f32(np.inf))])
    smallest = values[1]
    low = np.array([smallest / 2, smallest / 4, smallest * 0.75, smallest * 0.5000001, 1e-30, 0.0])
    big = np.array([values[-1] * 1.0001, values[-1] + (values[-1] - values[-2]) / 2, 1e30,
                    np.inf, np.finfo(np.float32).max])
    rng = np.random.default_rng(8)
    spread = 2.0 ** rng.uniform(-30, 20, 20000)
    x = np.concatenate([values, mids, around, low, big, spread]).astype(f32)
    x = np.concatenate([x, -x, np.array([np.nan, -0.0], dtype=f32)])
    return x


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--interp", required=True)
    p.add_argument("--work", required=True)
    a = p.parse_args()
    for name in FORMATS:
        x = inputs(name)
        d = os.path.join(a.work, name)
        os.makedirs(os.path.join(d, "in"), exist_ok=True)
        np.save(os.path.join(d, "in", "x.npy"), x)
        t = f"tensor<{len(x)}xf32>"
        with open(os.path.join(d, "f.mlir"), "w") as f:
            f.write(f'func.func @f(%x: {t} {{step.input = "x"}}) -> {t} {{\n'
                    f"  %y = step.round_fp8 %x format {name} : {t}\n  return %y : {t}\n}}\n")
        subprocess.run([a.interp, os.path.join(d, "f.mlir"), "--function=f",
                        f"--inputs={os.path.join(d, 'in')}", f"--output={os.path.join(d, 'out')}"],
                       check=True, stdout=subprocess.DEVNULL)
        got = np.load(os.path.join(d, "out", "result0.npy"))
        want = reference(x, name)
        same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
        if not same.all():
            i = int(np.flatnonzero(~same)[0])
            sys.exit(f"FAIL {name}: round_fp8({x[i]!r}) = {got[i]!r}, the reference "
                     f"{want[i]!r} ({int((~same).sum())} of {len(x)} differ)")
        print(f"ok: {name}: {len(x)} inputs bit for bit ({len(finite_values(name))} finite "
              f"values, largest {finite_values(name)[-1][0]:g})")


if __name__ == "__main__":
    main()

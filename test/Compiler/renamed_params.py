#!/usr/bin/env python3
"""Checks of test/Compiler/renamed-params.test: a model's structure comes from
its IR, never from its parameter names.

    renamed_params.py rename IN.mlir OUT.mlir MAP.json [--strip-blocks]
        every parameter renamed (h.3.attn.c_attn.weight -> blk_3_attn_c_attn_weight_p,
        wte -> wte_p), the mapping written; --strip-blocks also drops the
        front end's `block N` markers, so stepc must derive the layers itself
    renamed_params.py reports A.json B.json [...]
        the reports agree on the planned peak, the saved activations (per
        block too), the recomputation and the executed FLOPs
    renamed_params.py sources A.cpp B.cpp [...]
        the emitted steps have as many block functions, and call them as often
    renamed_params.py init MODEL.mlir ORIGINAL_DIR RENAMED_DIR MAP.json
        one set of initial parameters for --init-npy, under both names (the
        runtime's initialiser draws by name, so it would differ otherwise)
    renamed_params.py npy ORIGINAL_DIR RENAMED_DIR MAP.json
        every tensor --save-npy wrote is bit-identical under the mapping
"""
import json
import os
import re
import sys


def fail(message):
    sys.exit(f"FAIL: {message}")


def rename(src, dst, mapping_path, strip):
    text = open(src).read()
    mapping = {}

    def new_name(name):
        mapping[name] = re.sub(r"^(h|layers)\.", "blk.", name).replace(".", "_") + "_p"
        return mapping[name]

    def param(m):
        attrs = m.group(2)
        if strip:
            attrs = re.sub(r", block \d+", "", attrs)
        return f'#step.param<"{new_name(m.group(1))}"{attrs}>'

    out = re.sub(r'#step\.param<"([^"]+)"([^>]*)>', param, text)
    if not mapping:
        fail(f"no parameter in {src}")
    if strip and ", block " in out:
        fail("block markers left")
    open(dst, "w").write(out)
    json.dump(mapping, open(mapping_path, "w"), indent=1)
    print(f"renamed {len(mapping)} parameters")


KEYS = ("planned_peak_bytes", "saved_activation_bytes", "saved_activation_bytes_by_block",
        "executed_flops_per_step", "recompute")


def reports(paths):
    rs = [json.load(open(p)) for p in paths]
    for key in KEYS:
        if key not in rs[0]:
            continue
        values = [r.get(key) for r in rs]
        if any(v != values[0] for v in values):
            fail(f"'{key}' differs: {values}")
    blocks = [k for k in rs[0].get("saved_activation_bytes_by_block", {}) if k.startswith("block ")]
    print(f"reports agree: peak {rs[0]['planned_peak_bytes']}, {len(blocks)} blocks")


def sources(paths):
    counts = []
    for path in paths:
        text = open(path).read()
        functions = len(re.findall(r"^static int stepc_block\d+\(", text, re.M))
        calls = len(re.findall(r"if \(int failed = stepc_block\d+\(", text))
        counts.append((functions, calls))
    if any(c != counts[0] for c in counts) or counts[0][0] == 0:
        fail(f"(block functions, calls) differ or are none: {counts}")
    print(f"sources agree: {counts[0][0]} block functions, {counts[0][1]} calls")


def npy(original, renamed, mapping_path):
    import numpy as np
    mapping = json.load(open(mapping_path))
    names = sorted(f[:-4] for f in os.listdir(original) if f.endswith(".npy"))
    if not names:
        fail(f"no .npy in {original}")
    for name in names:
        other = name
        for prefix in ("", "param.", "exp_avg.", "exp_avg_sq."):
            if name.startswith(prefix) and name[len(prefix):] in mapping:
                other = prefix + mapping[name[len(prefix):]]
        a = np.load(os.path.join(original, name + ".npy"))
        b = np.load(os.path.join(renamed, other + ".npy"))
        if a.shape != b.shape or not np.array_equal(a, b):
            fail(f"{name} and {other} differ")
    print(f"ok: {len(names)} tensors bit-identical")


def init(model, original, renamed, mapping_path):
    import numpy as np
    mapping = json.load(open(mapping_path))
    rng = np.random.default_rng(0)
    params = re.findall(r'tensor<([0-9x]+)xf32> \{step\.param = #step\.param<"([^"]+)"', open(model).read())
    for directory in (original, renamed):
        os.makedirs(directory, exist_ok=True)
    for shape, name in params:
        value = (0.02 * rng.standard_normal([int(d) for d in shape.split("x")])).astype(np.float32)
        np.save(os.path.join(original, name + ".npy"), value)
        np.save(os.path.join(renamed, mapping[name] + ".npy"), value)
    print(f"{len(params)} initial parameters")


if __name__ == "__main__":
    command, rest = sys.argv[1], sys.argv[2:]
    if command == "rename":
        rename(rest[0], rest[1], rest[2], "--strip-blocks" in rest)
    elif command == "reports":
        reports(rest)
    elif command == "sources":
        sources(rest)
    elif command == "init":
        init(*rest)
    elif command == "npy":
        npy(*rest)
    else:
        fail(f"unknown command {command}")

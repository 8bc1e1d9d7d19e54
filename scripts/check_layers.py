#!/usr/bin/env python3
"""The include graph of stepc's sources: no circle, no arrow that points up.

A unit is a source file with its header (X.h and X.cpp or X.cc; a public
header under dialects|passes|compiler/include/stepc/ belongs with the
library file of the same name); an MLIR dialect's IR directory (its ops,
attributes and dialect class, which tablegen's generated code ties
together) is one unit. An arrow goes from a unit to each unit whose file
one of its files includes (`#include "..."`).

Checked:
- no circle: no unit reaches itself through arrows;
- layers: dialects <- passes <- compiler, with tools/, python/ and fuzz/
  on top. dialects/ includes no pass or compiler file, passes/ no compiler
  file; the runtime includes only the runtime (its tests may use the
  reference interpreter as their oracle), and the compiler side includes
  from the runtime only the shared contracts named in SHARED (the step.so
  ABI, the op semantics both sides compute with, launch geometry, file
  formats).

    scripts/check_layers.py [REPO]      # prints the violations, exit 1 if any
"""
import collections
import os
import re
import sys

SOURCE_DIRS = ["dialects", "passes", "compiler", "runtime", "tools", "python", "fuzz"]
INCLUDE_ROOTS = ["", "dialects/include", "passes/include", "compiler/include",
                 "runtime/kernels/cpu", "runtime/kernels", "runtime"]
EXTENSIONS = (".h", ".cc", ".cpp", ".cu", ".cuh", ".def")
# Runtime headers the compiler side shares: one definition for both.
SHARED = {
    "runtime/stepc_abi.h",                  # the step.so ABI the emitters print
    "runtime/cache_dir.h",                  # where stepc and stepc-run cache
    "runtime/kernels/elementwise_math.h",   # op semantics (interpreter, kernels)
    "runtime/kernels/philox.h",             # dropout's random numbers
    "runtime/kernels/cuda/launch_config.h", # CUDA launch geometry the plan sizes
    "runtime/formats/npy.h",                # the .npy format
}
LAYER = {"dialects": 0, "passes": 1, "compiler": 2}


def sources(root):
    found = []
    for top in SOURCE_DIRS:
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            found += [os.path.relpath(os.path.join(dirpath, n), root)
                      for n in names if n.endswith(EXTENSIONS)]
    return sorted(found)


def unit(path):
    stem = os.path.splitext(path)[0]
    m = re.match(r"(dialects|passes|compiler)/include/stepc/[^/]+/(.*)", stem)
    if m:
        stem = f"{m.group(1)}/lib/{m.group(2)}"
    # A dialect's IR library: ops, attributes and dialect are one unit.
    m = re.match(r"(dialects/lib/\w+/IR)/", stem)
    return m.group(1) if m else stem


def includes(root, path, files):
    text = open(os.path.join(root, path), errors="replace").read()
    for name in re.findall(r'^\s*#\s*include\s+"([^"]+)"', text, re.M):
        for base in [os.path.dirname(path)] + INCLUDE_ROOTS:
            target = os.path.normpath(os.path.join(base, name))
            if target in files:
                yield target
                break


def circles(arrows):
    """Strongly connected components of more than one unit (Tarjan)."""
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(arrows.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10000)
    for v in sorted(arrows):
        if v not in index:
            visit(v)
    return found


def layer_violation(path, target):
    """Why `path` may not include `target`, or None."""
    src, dst = path.split("/")[0], target.split("/")[0]
    if src in LAYER and dst in LAYER and LAYER[dst] > LAYER[src]:
        return f"{src}/ includes {dst}/ (a layer above it)"
    if src in LAYER and dst == "runtime" and target not in SHARED:
        return "the compiler side includes a runtime file that is not a shared contract"
    if src == "runtime" and dst in LAYER and not re.search(r"_test\.(cc|cpp)$", path):
        return "the runtime includes the compiler side"
    if src in LAYER and dst in ("tools", "python", "fuzz"):
        return f"{src}/ includes {dst}/"
    return None


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(__file__), ".."))
    files = set(sources(root))
    arrows, problems = collections.defaultdict(set), []
    for path in sorted(files):
        for target in includes(root, path, files):
            if unit(target) != unit(path):
                arrows[unit(path)].add(unit(target))
            why = layer_violation(path, target)
            if why:
                problems.append(f"back arrow: {path} -> {target}: {why}")
    for component in circles(arrows):
        problems.append("circle: " + " -> ".join(component + component[:1]))
    units = set(arrows) | {w for ws in arrows.values() for w in ws}
    print(f"check_layers: {len(units)} units, {sum(len(w) for w in arrows.values())} arrows")
    for p in problems:
        print(p)
    print("check_layers: " + (f"{len(problems)} problem(s)" if problems else
                              "no circle, no back arrow"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

"""Every C function stepc emits for a block equals a block function of the
final module, step by step: `stepc_block<F>` of the training step,
`stepc_eval_block<F>` in namespace stepc_eval and stepc_sample for the
forward-only steps' `@<loss>_eval_step_block<F>` and
`@<loss>_sample_step_block<F>`; and each step's calls match its call sites.

    check_block_functions.py FINAL.mlir STEP.cpp
"""
import re
import sys


def ir_functions(mlir):
    """{step kind: (sorted block numbers, calls)} from the final module."""
    found = {}
    for kind in ("train", "eval", "sample"):
        defined = sorted(int(n) for n in re.findall(
            r"func\.func private @\w+_%s_step_block(\d+)\(" % kind, mlir))
        calls = len(re.findall(r"call @\w+_%s_step_block\d+\(" % kind, mlir))
        found[kind] = (defined, calls)
    return found


def source_functions(source):
    """The same from the emitted source: the text before the eval namespace
    is the training step's, then each namespace's."""
    parts = {"train": source, "eval": "", "sample": ""}
    for kind in ("eval", "sample"):
        m = re.search(r"namespace stepc_%s \{(.*?)\}  // namespace stepc_%s" % (kind, kind),
                      source, re.S)
        if m:
            parts[kind] = m.group(1)
            parts["train"] = parts["train"].replace(m.group(0), "")
    found = {}
    for kind, text in parts.items():
        name = "stepc_block" if kind == "train" else "stepc_eval_block"
        defined = sorted(int(n) for n in re.findall(r"^static int %s(\d+)\(" % name, text, re.M))
        calls = len(re.findall(r"if \(int failed = %s\d+\(" % name, text))
        found[kind] = (defined, calls)
    return found


ir = ir_functions(open(sys.argv[1]).read())
emitted = source_functions(open(sys.argv[2]).read())
if ir != emitted:
    sys.exit(f"block functions differ: final module {ir}, emitted source {emitted}")
if not ir["train"][0]:
    sys.exit("the training step has no block function")
print("block functions:", {k: len(v[0]) for k, v in ir.items()},
      "calls:", {k: v[1] for k, v in ir.items()})

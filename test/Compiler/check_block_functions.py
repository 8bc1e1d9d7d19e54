"""Every C function stepc emits for a block equals a block function of the
final module, step by step: `stepc_block<F>` of the training step,
`stepc_eval_block<F>` in namespace stepc_eval and stepc_sample for the
forward-only steps' `@<loss>_eval_step_block<F>` and
`@<loss>_sample_step_block<F>`; and each step's calls match its call sites.
Under a pipeline the final module nests one module per stage: the i-th
source is stage i's, checked against `module @stage<i>`, and every stage
must be given.

    check_block_functions.py FINAL.mlir STEP.cpp [STAGE1.cpp ...]
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


def stage_texts(mlir):
    """The text of each `module @stage<i>` in rank order, or [mlir] when
    the module has no stages."""
    starts = [(int(m.group(1)), m.start())
              for m in re.finditer(r"^  module @stage(\d+) attributes", mlir, re.M)]
    if not starts:
        return [mlir]
    if [i for i, _ in starts] != list(range(len(starts))):
        sys.exit(f"stages out of order: {[i for i, _ in starts]}")
    ends = [start for _, start in starts[1:]] + [len(mlir)]
    return [mlir[start:end] for (_, start), end in zip(starts, ends)]


stages = stage_texts(open(sys.argv[1]).read())
sources = sys.argv[2:]
if len(sources) != len(stages):
    sys.exit(f"the final module has {len(stages)} stage(s), {len(sources)} source(s) given")
for stage, (text, path) in enumerate(zip(stages, sources)):
    ir = ir_functions(text)
    emitted = source_functions(open(path).read())
    if ir != emitted:
        sys.exit(f"stage {stage}: block functions differ: final module {ir}, "
                 f"emitted source {emitted}")
    if not ir["train"][0]:
        sys.exit(f"stage {stage}: the training step has no block function")
    print(f"stage {stage}: " if len(stages) > 1 else "", "block functions: ",
          {k: len(v[0]) for k, v in ir.items()}, " calls: ", {k: v[1] for k, v in ir.items()},
          sep="")

#!/usr/bin/env python3
"""The hostile-input suite: hundreds of bad inputs to every tool, each outcome
classified.

    hostile.py --bin BUILD/bin --examples SRC/examples --work DIR [--mpirun CMD]
               [--only PREFIX] [-v]

Every case is a command that must fail with an error (or, for a few, succeed)
and the text its error must contain: the file, flag, op or tensor at fault.
An outcome is one of

  ok         the expected exit, and the message names the culprit
  crash      a signal, an abort, an uncaught exception, an LLVM fatal error
  hang       no exit within the case's timeout
  data loss  a file that existed before (the model, a previous output) was
             changed or removed
  silent     exit 0 where an error was due
  unclear    an error whose message does not name the culprit
  wrong      an error where success was due

and the suite passes only if every case is ok. Cases are generated, not
listed one by one: each *class* of bad input (a zero-sized dimension, a
truncated model, a malformed flag value, a corrupt data file, an abused
C API call) is applied at every place it can occur.
"""

import argparse
import hashlib
import json
import os
import re
import shutil
import stat
import struct
import subprocess
import sys

CRASH_MARKERS = ("terminate called", "LLVM ERROR", "Assertion", "Segmentation fault",
                 "AddressSanitizer", "runtime error:", "Stack dump", "core dumped",
                 "PLEASE submit a bug report")


DELETE = object()  # an edit that removes a field

# The character devices the cases read and write, by the kernel's numbers
# (major 1: null 3, zero 5, full 7).
DEVICES = {"null": 3, "zero": 5, "full": 7}


def private_device(work, name):
    """A private node of /dev/NAME under `work` (tests run as root: never
    point a tool at the system's own device files); None where this user
    may not make one (its cases are then left out)."""
    path = os.path.join(work, "dev", name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if not os.path.exists(path):
        try:
            os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, DEVICES[name]))
        except PermissionError:
            return None
    return path


class Case:
    def __init__(self, tool, name, argv, mentions, expect="error", protect=(), timeout=60,
                 env=None):
        self.tool, self.name, self.argv = tool, name, [str(a) for a in argv]
        self.mentions = [mentions] if isinstance(mentions, str) else list(mentions)
        self.expect, self.protect, self.timeout, self.env = expect, list(protect), timeout, env


def digest(path):
    if not os.path.exists(path):
        return None
    if os.path.isdir(path):
        return "dir:" + ",".join(sorted(os.listdir(path)))
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def run(case):
    before = {p: digest(p) for p in case.protect}
    env = dict(os.environ, **(case.env or {}))
    try:
        p = subprocess.run(case.argv, capture_output=True, text=True, errors="replace",
                           timeout=case.timeout, env=env)
    except subprocess.TimeoutExpired:
        return "hang", ""
    out = p.stdout + p.stderr
    if any(digest(path) != d for path, d in before.items()):
        return "data loss", out
    if p.returncode < 0 or p.returncode >= 128 or any(m in out for m in CRASH_MARKERS):
        return "crash", out
    if case.expect == "ok":
        return ("ok" if p.returncode == 0 else "wrong"), out
    if p.returncode == 0:
        return "silent", out
    if not any(m in out for m in case.mentions):
        return "unclear", out
    return "ok", out


# --- the compiler: models broken at every place -----------------------------

TYPE = re.compile(r"tensor<((?:\d+x)+)(f32|i32)>")


def model_mutations(text):
    """(name, broken text, what its error must name) for each class at each site."""
    body = text.index("func.func")
    # Every dimension of every tensor type, made zero, negative, huge.
    sites = [m for m in TYPE.finditer(text)]
    for k, m in enumerate(sites):
        dims = m.group(1)
        first = dims.split("x")[0]
        start = m.start(1)
        for label, value in (("zero", "0"), ("negative", "-1"), ("huge", "99999999999999999999"),
                             ("overflow", "4294967296x4294967296x4294967296")):
            yield (f"dim-{label}-{k}", text[:start] + value + text[start + len(first):],
                   ("bad.mlir:",))
    # Truncated anywhere in the body.
    for k in range(24):
        cut = body + (len(text) - body) * k // 24
        yield f"truncated-{k}", text[:cut], ("bad.mlir:",)
    # Each op renamed to one that does not exist; each op's result type broken.
    for k, m in enumerate(re.finditer(r"= (step\.\w+)", text)):
        yield (f"unknown-op-{k}", text[:m.start(1)] + m.group(1) + "_nope" + text[m.end(1):],
               ("bad.mlir:",))
    for k, m in enumerate(re.finditer(r"-> tensor<[^>]*>", text[body:])):
        s = body + m.start()
        yield (f"result-type-{k}", text[:s] + "-> tensor<3x5xf32>" + text[s + len(m.group()):],
               ("bad.mlir:",))
    # Element types swapped.
    for k, m in enumerate(re.finditer(r"xf32>", text)):
        if k % 3:
            continue
        yield f"element-type-{k}", text[:m.start()] + "xi1>" + text[m.end():], ("bad.mlir:",)
    # Whole-model faults.
    yield "no-loss-function", text.replace("attributes {step.loss}", ""), ("step.loss",)
    yield "no-parameters", re.sub(r"\{step\.param = #step\.param<[^}]*>\}", "", text), \
        ("bad.mlir:", "no parameters")
    yield "param-named-like-input", text.replace('"h.0.fc.weight"', '"tokens"'), \
        ("bad.mlir:", "tokens")
    yield "duplicate-param-name", text.replace('"h.1.fc.weight"', '"h.0.fc.weight"'), \
        ("bad.mlir:", "h.0.fc.weight")
    # Names that cannot be file names (the runtime writes <name>.npy).
    for k, bad in enumerate(["../keep", "a/b", "..", ".", "x\\\\y", "tab\\tname", "n" * 201]):
        yield (f"param-name-not-a-file-{k}", text.replace('"h.0.fc.weight"', f'"{bad}"'),
               ("bad.mlir:", "file name"))
        yield (f"input-name-not-a-file-{k}", text.replace('step.input = "targets"', f'step.input = "{bad}"'),
               ("bad.mlir:", "file name"))
    yield "empty-file", "", ("bad.mlir", "step.loss")
    yield "binary-garbage", "\x00\x01\x02\xff" * 64, ("bad.mlir",)
    # (stepc-opt may compile several loss functions; stepc takes exactly one.)
    yield "two-loss-functions", text + text.replace("@loss", "@loss2"), ("step.loss", "bad.mlir")


def compiler_cases(bin_dir, work, model):
    with open(model) as f:
        text = f.read()
    out = os.path.join(work, "previous-output.mlir")
    with open(out, "w") as f:
        f.write("// an earlier output that a failed compile must leave alone\n")
    for name, broken, mentions in model_mutations(text):
        path = os.path.join(work, "models", name, "bad.mlir")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", errors="surrogateescape") as f:
            f.write(broken)
        yield Case("stepc-opt", name, [f"{bin_dir}/stepc-opt", path,
                                       "--stepc-pipeline=target=cpu until=train-step"],
                   mentions, protect=[path],
                   expect="ok" if name == "two-loss-functions" else "error")
        yield Case("stepc", name, [f"{bin_dir}/stepc", "--target=cpu", path, "--emit=mlir",
                                   "-o", out], mentions, protect=[path, out])


def stepc_flag_cases(bin_dir, work, model):
    out = os.path.join(work, "flags-output.so")
    with open(out, "w") as f:
        f.write("an earlier step.so\n")
    base = [f"{bin_dir}/stepc", "--target=cpu", model, "--emit=mlir", "-o", out]
    bad = {
        "--shard": ["fsdp:0", "fsdp:-1", "ddp:", "tp:0", "tp:2,fsdp:2", "fsdp:2,tp:", "none,tp:2",
                    "tp:2,tp:2", "tp:4294967296", "fsdp:3", "fsdp:2x2", "hsdp:2",
                    "hsdp:0x2", "hsdp:4294967296x4294967296", "hsdp:2x9223372036854775807",
                    "fsdp:99999999999999999999", "fsdp:1e3", "FSDP:2", "fsdp:2,", " ",
                    # expert parallelism: malformed, an axis it cannot join, a
                    # model without experts (ep:2)
                    "ep:0", "ep:1", "ep:", "ep:2,pp:1", "hsdp:2x2,ep:2,pp:2,tp:2", "ep:2,ep:2",
                    "ep:2,tp:0", "ep:99999999999999999999", "EP:2", "ep:2,", "tp:2,ep:2",
                    "ep:2"],
        "--batch": ["0", "-1", "3", "abc", "99999999999999999999", "1e3"],
        "--memory-budget": ["abc", "-5", "1", "10QB", "nanGB", "1e3", "99999999999999999999TB",
                            "0x10", "MB"],
        "--remat": ["everything", "BLOCK", "auto "],
        "--precision": ["fp16", "bf32", ""],
        "--target": ["tpu", "CPU", ""],
        "--emit": ["exe", "llvm", ""],
        "--link-gbps": ["nan", "inf", "-1", "abc"],
        "--compute-gflops": ["0", "-1", "nan", "inf"],
        "--optimizer-options": ["beta1=2", "beta1=abc", "garbage=1", "beta2=-1", "lr",
                                "weight-decay=nan", "epsilon=0", "momentum=1", "momentum=-0.1",
                                "nesterov=true", "nesterov=maybe", "ns-steps=0",
                                "adjust-lr=sideways", "muon-momentum=1"],
        "--optimizer": ["shampoo", "AdamW", "", "sgd ", "adamw,sgd"],
        "--dump-after": ["no-such-pass"],
    }
    for flag, values in bad.items():
        for k, value in enumerate(values):
            mentions = [flag.lstrip("-"), value] if value.strip() else [flag.lstrip("-")]
            if flag == "--batch" and value == "3":
                argv = base + ["--shard=fsdp:2", f"{flag}={value}"]
                mentions = ["batch", "3"]
            elif flag == "--memory-budget" and value == "1":
                mentions = ["memory budget", "infeasible"]
                argv = base + [f"{flag}={value}"]
            else:
                argv = base + [f"{flag}={value}"]
            if flag == "--shard" and value == "fsdp:3":
                mentions = ["3"]
            if flag == "--shard" and value == "ep:2":
                mentions = ["ep:2", "mixture-of-experts"]
            if flag == "--optimizer-options":
                mentions = ["optimizer", "beta", "weight", "epsilon", value.split("=")[0]]
            yield Case("stepc", f"flag{flag}={value!r}", argv, mentions, protect=[model, out])
    missing_dir = os.path.join(work, "no", "such", "dir", "out.so")
    yield Case("stepc", "output-in-missing-directory",
               [f"{bin_dir}/stepc", "--target=cpu", model, "-o", missing_dir], ["out.so", "no/such"],
               protect=[model])
    yield Case("stepc", "output-is-the-input",
               [f"{bin_dir}/stepc", "--target=cpu", model, "--emit=mlir", "-o", model],
               ["input", model], protect=[model])
    yield Case("stepc", "report-into-directory", base + [f"--report={work}"], [work],
               protect=[model, out])
    yield Case("stepc", "missing-input", [f"{bin_dir}/stepc", "--target=cpu",
                                          os.path.join(work, "nope.mlir"), "-o", out],
               ["nope.mlir"], protect=[out])
    yield Case("stepc", "input-is-directory", [f"{bin_dir}/stepc", "--target=cpu", work, "-o", out],
               [work], protect=[out])
    yield Case("stepc", "unknown-flag", base + ["--no-such-flag"], ["no-such-flag"],
               protect=[model, out])
    yield Case("stepc", "no-input", [f"{bin_dir}/stepc"], ["input", "model", "positional"])
    full = private_device(work, "full")
    if full:
        yield Case("stepc-opt", "output-device-full", [f"{bin_dir}/stepc-opt", model, "-o", full],
                   [full], protect=[model])
        yield Case("stepc", "output-device-full", [f"{bin_dir}/stepc", "--target=cpu", model,
                                                   "--emit=mlir", "-o", full], [full],
                   protect=[model])
    bf16 = os.path.join(work, "bf16-param.mlir")
    with open(bf16, "w") as f:
        f.write('func.func @loss(%w: tensor<4x4xbf16> {step.param = #step.param<"w", normal(0.02)>},\n'
                '    %x: tensor<2x4xi32> {step.input = "tokens"}, %t: tensor<2x4xi32> {step.input = "targets"})\n'
                '    -> tensor<f32> attributes {step.loss} {\n'
                '  %e = step.embedding %w, %x : (tensor<4x4xbf16>, tensor<2x4xi32>) -> tensor<2x4x4xbf16>\n'
                '  %f = step.convert %e : tensor<2x4x4xbf16> -> tensor<2x4x4xf32>\n'
                '  %l = step.cross_entropy %f, %t : (tensor<2x4x4xf32>, tensor<2x4xi32>) -> tensor<f32>\n'
                '  return %l : tensor<f32>\n}\n')
    yield Case("stepc", "bf16-parameter", [f"{bin_dir}/stepc", "--target=cpu", bf16, "--emit=mlir",
                                           "-o", out], ["parameter 'w'"], protect=[bf16, out])
    # A FIFO no process reads: writing it would block forever.
    fifo = os.path.join(work, "reader-less.fifo")
    if not os.path.exists(fifo):
        os.mkfifo(fifo)
    yield Case("stepc", "report-into-readerless-fifo", base + [f"--report={fifo}"],
               ["no process reads it"], protect=[model], timeout=60)
    yield Case("stepc", "memory-plot-into-readerless-fifo", base + [f"--memory-plot={fifo}"],
               ["no process reads it"], protect=[model], timeout=60)
    yield Case("stepc-opt", "unknown-pipeline-option",
               [f"{bin_dir}/stepc-opt", model, "--stepc-pipeline=target=cpu frobnicate=1"],
               ["frobnicate"], protect=[model])


# --- the runtime: stepc-run's flags and files --------------------------------

def npy(path, shape, dtype="<i4", fortran=False, data=None, header_extra=""):
    count = 1
    for d in shape:
        count *= d
    dims = "(" + "".join(f"{d}," for d in shape) + ")"
    header = (f"{{'descr': '{dtype}', 'fortran_order': {fortran}, 'shape': {dims}, "
              f"{header_extra}}}")
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    width = int(dtype[2:]) if dtype[2:].isdigit() else 4
    payload = data if data is not None else b"\x00" * (count * width)
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + payload)


def llmc(path, magic=20240520, version=1, count=None, tokens=1000, value=1, truncate=0):
    header = [0] * 256
    header[0], header[1] = magic, version
    header[2] = tokens if count is None else count
    blob = struct.pack("<256i", *header) + struct.pack("<H", value) * tokens
    with open(path, "wb") as f:
        f.write(blob[:len(blob) - truncate] if truncate else blob)


def runtime_cases(bin_dir, work, so, small_so, batch, seq, vocab):
    run_ = [f"{bin_dir}/stepc-run", so, "--steps", "1"]
    d = os.path.join(work, "runtime")
    os.makedirs(d, exist_ok=True)
    env = {"OMP_NUM_THREADS": "1"}

    def case(name, extra, mentions, protect=(), expect="error", argv=None, timeout=60):
        return Case("stepc-run", name, (argv or run_) + extra, mentions, expect=expect,
                    protect=protect, env=env, timeout=timeout)

    # The module itself.
    with open(so, "rb") as f:
        blob = f.read()
    for k, size in enumerate([0, 3, 64, 1000, 4096, len(blob) // 4, len(blob) // 2,
                              len(blob) - 4096, len(blob) - 1]):
        path = os.path.join(d, f"truncated-{k}.so")
        with open(path, "wb") as f:
            f.write(blob[:size])
        yield case(f"truncated-so-{size}", [], [path], argv=[f"{bin_dir}/stepc-run", path])
    text = os.path.join(d, "text.so")
    with open(text, "w") as f:
        f.write("not a shared object\n" * 100)
    yield case("text-as-so", [], [text], argv=[f"{bin_dir}/stepc-run", text])
    yield case("directory-as-so", [], [d], argv=[f"{bin_dir}/stepc-run", d])
    yield case("missing-so", [], ["nope.so"], argv=[f"{bin_dir}/stepc-run", os.path.join(d, "nope.so")])
    libm = "/lib/x86_64-linux-gnu/libm.so.6"
    if os.path.exists(libm):
        yield case("foreign-so", [], [libm, "stepc"], argv=[f"{bin_dir}/stepc-run", libm])
    yield case("no-so", [], ["step.so"], argv=[f"{bin_dir}/stepc-run"])
    yield case("two-so", [], ["step.so"], argv=[f"{bin_dir}/stepc-run", so, so])

    # Flag values.
    for flag, values in {"--steps": ["-1", "abc", "1.5", "99999999999999999999"],
                         "--lr": ["nan", "-1", "inf", "abc", "-inf"],
                         "--warmup": ["-1", "abc"],
                         "--min-lr-ratio": ["2", "-0.1", "nan"],
                         "--log-every": ["0", "-3"],
                         "--seed": ["-1", "abc"],
                         "--save-every": ["-1", "abc"],
                         "--keep": ["-2"],
                         "--threads": ["-1", "5000", "abc"],
                         "--eval-every": ["-1"],
                         "--eval-batches": ["0", "-5"],
                         "--val-fraction": ["1", "-0.5", "nan", "abc"],
                         "--sample": ["-1", "abc"],
                         "--temperature": ["-1", "nan", "inf"],
                         "--top-k": ["-1"]}.items():
        for value in values:
            yield case(f"flag{flag}={value}", [f"{flag}={value}"], [flag.lstrip("-").replace("-", "_"),
                                                                    flag.lstrip("-"), value])
    yield case("unknown-flag", ["--no-such-flag=1"], ["no_such_flag", "no-such-flag"])
    yield case("two-data-sources", ["--data", so, "--corpus", so], ["--data", "--corpus"])
    # Checkpoints, validation and sampling flags that contradict each other
    # or point nowhere.
    yield case("save-every-without-dir", ["--save-every", "5"], ["--save-every", "--checkpoint-dir"])
    yield case("auto-resume-without-dir", ["--auto-resume"], ["--auto-resume"])
    yield case("checkpoint-dir-under-file", ["--checkpoint-dir", os.path.join(so, "ckpt")],
               ["--checkpoint-dir", "not a directory"])
    yield case("resume-missing", ["--resume", os.path.join(d, "no-ckpt")], ["no-ckpt"])
    yield case("resume-not-a-checkpoint", ["--resume", d], [d, "no complete checkpoint"])
    yield case("resume-and-init-npy", ["--resume", d, "--init-npy", d], ["--resume", "--init-npy"])
    yield case("eval-every-without-val", ["--eval-every", "2"], ["--eval-every"])
    yield case("two-val-sources", ["--val-fraction", "0.1", "--val-data", so],
               ["--val-data", "--val-fraction"])
    yield case("val-data-missing", ["--val-data", os.path.join(d, "no-val.bin")], ["no-val.bin"])
    yield case("val-batch-npy-missing", ["--val-batch-npy", os.path.join(d, "no-val")], ["no-val"])
    yield case("empty-prompt", ["--sample", "3", "--prompt", ""], ["--prompt"])
    yield case("vocab-missing", ["--sample", "3", "--vocab", os.path.join(d, "no-meta.json")],
               ["no-meta.json"])

    # Outputs: validated before anything is written; existing files survive.
    keep = os.path.join(d, "keep.jsonl")
    with open(keep, "w") as f:
        f.write('{"kept": true}\n')
    yield case("metrics-kept-on-bad-flag", ["--metrics", keep, "--lr", "-1"], ["lr"], protect=[keep])
    yield case("metrics-kept-on-bad-data", ["--metrics", keep, "--data", os.path.join(d, "nope.bin")],
               ["nope.bin"], protect=[keep])
    yield case("metrics-into-directory", ["--metrics", d], ["metrics", d])
    yield case("metrics-in-missing-dir", ["--metrics", os.path.join(d, "no/such/m.jsonl")],
               ["metrics", "no/such"])
    yield case("plot-into-directory", ["--plot", d], ["plot", d])
    yield case("plot-in-missing-dir", ["--plot", os.path.join(d, "no/such/p.svg")], ["plot", "no/such"])
    regular = os.path.join(d, "regular-file")
    with open(regular, "w") as f:
        f.write("x")
    yield case("save-npy-under-file", ["--save-npy", os.path.join(regular, "sub")],
               ["save-npy", "regular-file"], protect=[regular])
    yield case("save-npy-is-file", ["--save-npy", regular], ["save-npy", "regular-file"],
               protect=[regular])

    # Token files.
    def data_case(name, writer, mentions):
        path = os.path.join(d, f"{name}.bin")
        writer(path)
        return case(f"data-{name}", ["--data", path], mentions + [path])

    yield case("data-missing", ["--data", os.path.join(d, "nope.bin")], ["nope.bin"])
    yield case("data-directory", ["--data", d], [d])
    zero, null = private_device(work, "zero"), private_device(work, "null")
    if zero and null:
        yield case("data-dev-zero", ["--data", zero], [zero], timeout=30)
        yield case("data-dev-null", ["--data", null], [null])
    yield data_case("empty", lambda p: open(p, "wb").close(), [])
    yield data_case("odd-bytes", lambda p: open(p, "wb").write(b"\x01\x00" * 500 + b"\x01"), [])
    yield data_case("too-short", lambda p: open(p, "wb").write(b"\x01\x00" * 3), [])
    yield data_case("out-of-vocab", lambda p: open(p, "wb").write(struct.pack("<H", vocab) * 4000),
                    [str(vocab)])
    yield data_case("llmc-version-2", lambda p: llmc(p, version=2), ["version"])
    yield data_case("llmc-negative-count", lambda p: llmc(p, count=-5), ["-5"])
    yield data_case("llmc-huge-count", lambda p: llmc(p, count=2**31 - 1), ["truncated"])
    yield data_case("llmc-truncated", lambda p: llmc(p, truncate=3), ["truncated"])
    yield data_case("llmc-header-only", lambda p: llmc(p, tokens=0, count=0), ["tokens"])
    yield data_case("llmc-wrong-magic", lambda p: llmc(p, magic=20240521), ["magic"])
    yield data_case("llmc-short-header", lambda p: open(p, "wb").write(struct.pack("<3i", 20240520, 1, 5)),
                    ["truncated", "header"])
    yield data_case("llmc-out-of-vocab", lambda p: llmc(p, value=vocab), [str(vocab)])

    # Corpora.
    wide = os.path.join(d, "wide.txt")
    with open(wide, "wb") as f:
        f.write(bytes(range(256)) * 40)
    # (A model of 32 token ids: the corpora have more distinct characters.)
    yield case("corpus-too-many-characters", ["--corpus", wide], [wide, "distinct characters"],
               argv=[f"{bin_dir}/stepc-run", small_so, "--steps", "1"])
    yield case("embedded-corpus-too-many-characters", [], ["embedded corpus", "distinct characters"],
               argv=[f"{bin_dir}/stepc-run", small_so, "--steps", "1"])
    yield case("corpus-missing", ["--corpus", os.path.join(d, "nope.txt")], ["nope.txt"])
    yield case("corpus-directory", ["--corpus", d], [d])
    if zero:
        yield case("corpus-dev-zero", ["--corpus", zero], [zero], timeout=30)
    short = os.path.join(d, "short.txt")
    with open(short, "w") as f:
        f.write("ab")
    yield case("corpus-too-short", ["--corpus", short], [short])

    # Batches and parameters as .npy files.
    def npy_dir(name, tokens=None, targets=None):
        path = os.path.join(d, "npy", name)
        os.makedirs(path, exist_ok=True)
        npy(os.path.join(path, "tokens.npy"), (batch, seq)) if tokens is None else tokens(
            os.path.join(path, "tokens.npy"))
        npy(os.path.join(path, "targets.npy"), (batch, seq)) if targets is None else targets(
            os.path.join(path, "targets.npy"))
        return path

    bad_npys = {
        "float-ids": (lambda p: npy(p, (batch, seq), "<f4"), ["float"]),
        "f8-ids": (lambda p: npy(p, (batch, seq), "<f8"), ["float"]),
        "transposed": (lambda p: npy(p, (seq, batch)), [f"[{seq}, {batch}]"]),
        "one-dim": (lambda p: npy(p, (batch * seq,)), ["shape"]),
        "extra-dim": (lambda p: npy(p, (batch, seq, 1)), ["shape"]),
        "fortran": (lambda p: npy(p, (batch, seq), fortran=True), ["C order"]),
        "negative-dim": (lambda p: npy(p, (batch, -seq)), ["shape"]),
        "huge-shape": (lambda p: npy(p, (2**40, 2**40), data=b""), ["shape"]),
        "huge-but-valid-shape": (lambda p: npy(p, (2**20, 2**19), data=b""), ["holds", "needs"]),
        "truncated-data": (lambda p: npy(p, (batch, seq), data=b"\x00" * 10), ["truncated"]),
        "extra-data": (lambda p: npy(p, (batch, seq), data=b"\x00" * (4 * batch * seq + 4)), ["holds"]),
        "bad-magic": (lambda p: open(p, "wb").write(b"NOTNUMPY" + b"\x00" * 100), ["not a .npy"]),
        "empty-file": (lambda p: open(p, "wb").close(), ["not a .npy"]),
        "bool-dtype": (lambda p: npy(p, (batch, seq), "|b1"), ["dtype"]),
        "big-endian": (lambda p: npy(p, (batch, seq), ">i4"), ["dtype"]),
        "no-shape": (lambda p: open(p, "wb").write(
            b"\x93NUMPY\x01\x00" + struct.pack("<H", 54) + b"{'descr': '<i4', 'fortran_order': False, }".ljust(53) + b"\n"),
            ["shape"]),
        "header-overrun": (lambda p: open(p, "wb").write(b"\x93NUMPY\x01\x00\xff\xff{'descr'"),
                           ["header"]),
        "negative-ids": (lambda p: npy(p, (batch, seq), data=struct.pack(f"<{batch * seq}i",
                                                                           *([-1] * batch * seq))),
                         ["-1"]),
        "out-of-vocab-ids": (lambda p: npy(p, (batch, seq), data=struct.pack(
            f"<{batch * seq}i", *([vocab] * batch * seq))), [str(vocab)]),
    }
    for name, (writer, mentions) in bad_npys.items():
        path = npy_dir(f"tokens-{name}", tokens=writer)
        yield case(f"batch-npy-tokens-{name}", ["--batch-npy", path], mentions + ["tokens.npy"])
        path = npy_dir(f"targets-{name}", targets=writer)
        yield case(f"batch-npy-targets-{name}", ["--batch-npy", path], mentions + ["targets.npy"])
    yield case("batch-npy-missing-dir", ["--batch-npy", os.path.join(d, "nope")], ["nope"])
    path = os.path.join(d, "npy", "no-targets")
    os.makedirs(path, exist_ok=True)
    npy(os.path.join(path, "tokens.npy"), (batch, seq))
    yield case("batch-npy-no-targets", ["--batch-npy", path], ["targets.npy"])
    yield case("batch-npy-ok", ["--batch-npy", npy_dir("fine")], [], expect="ok")
    # A checkpoint of a 3-batch stream, resumed on the stream with one later
    # batch changed (or the batches renamed, reordered, one removed): the
    # fingerprint covers every batch.
    ids = [1] * (batch * seq)
    for name, change in [
            ("last-batch-edited", lambda v: npy(os.path.join(v, "002", "tokens.npy"), (batch, seq),
                                                data=struct.pack(f"<{batch * seq}i", *ids))),
            ("batch-renamed", lambda v: os.rename(os.path.join(v, "002"), os.path.join(v, "zzz"))),
            ("batch-removed", lambda v: shutil.rmtree(os.path.join(v, "002")))]:
        stream = os.path.join(d, "npy", f"stream-{name}")
        shutil.rmtree(stream, ignore_errors=True)
        for k in range(3):
            npy_dir(os.path.join(f"stream-{name}", f"{k:03d}"))
        ckpt = os.path.join(d, f"stream-{name}-ckpt")
        shutil.rmtree(ckpt, ignore_errors=True)
        subprocess.run(run_[:2] + ["--steps", "2", "--batch-npy", stream, "--checkpoint-dir", ckpt],
                       check=True, capture_output=True, env=dict(os.environ, **env))
        change(stream)
        yield case(f"batch-npy-resume-{name}", ["--batch-npy", stream, "--resume", ckpt,
                                                "--steps", "3"],
                   ["contents differ" if name == "last-batch-edited" else "resume with"])

    # --init-npy: every parameter's file checked (shape, finiteness).
    init = os.path.join(d, "init")
    subprocess.run(run_ + ["--save-npy", init], check=True, capture_output=True,
                   env=dict(os.environ, **env))
    yield case("init-npy-missing-dir", ["--init-npy", os.path.join(d, "nope")], ["nope"])
    params = sorted(f[len("param."):-4] for f in os.listdir(init) if f.startswith("param."))
    # Neither <name>.npy nor the param.<name>.npy of a --save-npy directory.
    wrong = os.path.join(d, "init-wrong-names")
    os.makedirs(wrong, exist_ok=True)
    for p in params:
        shutil.copy(os.path.join(init, f"param.{p}.npy"), os.path.join(wrong, f"weight.{p}.npy"))
    yield case("init-npy-wrong-names", ["--init-npy", wrong], [".npy"])
    for k, name in enumerate(params[:6]):
        src = os.path.join(init, f"param.{name}.npy")
        for label, mutate in (("nan", "nan"), ("transposed", "transpose"), ("missing", "missing"),
                              ("truncated", "truncate")):
            target = os.path.join(d, f"init-{label}-{k}")
            if os.path.exists(target):
                shutil.rmtree(target)
            os.makedirs(target)
            for p in params:
                shutil.copy(os.path.join(init, f"param.{p}.npy"), os.path.join(target, f"{p}.npy"))
            dst = os.path.join(target, f"{name}.npy")
            with open(src, "rb") as f:
                raw = f.read()
            header_len = struct.unpack("<H", raw[8:10])[0]
            header = raw[10:10 + header_len].decode()
            data = raw[10 + header_len:]
            shape = tuple(int(x) for x in re.findall(r"\d+", header.split("shape")[1].split(")")[0]))
            if mutate == "nan":
                npy(dst, shape, "<f4", data=struct.pack("<f", float("nan")) + data[4:])
                mentions = [name, "nan"]
            elif mutate == "transpose":
                if len(shape) < 2 or shape[0] == shape[1]:
                    npy(dst, shape + (1,), "<f4", data=data)
                else:
                    npy(dst, (shape[1], shape[0]) + shape[2:], "<f4", data=data)
                mentions = [name, "shape"]
            elif mutate == "missing":
                os.remove(dst)
                mentions = [name]
            else:
                with open(dst, "wb") as f:
                    f.write(raw[:len(raw) // 2])
                mentions = [name, "truncated", "holds"]
            yield case(f"init-npy-{label}-{name}", ["--init-npy", target], mentions)


def checkpoint_cases(bin_dir, work, so):
    """A checkpoint edited at every field (signed again, so the check behind
    the checksum is reached, or not), and poisoned tensors."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Runtime"))
    import edit_checkpoint  # noqa: E402  (the tests' own editor)
    d = os.path.join(work, "checkpoints")
    shutil.rmtree(d, ignore_errors=True)
    env = {"OMP_NUM_THREADS": "1"}
    subprocess.run([f"{bin_dir}/stepc-run", so, "--steps", "2", "--checkpoint-dir",
                    os.path.join(d, "good"), "--save-every", "2"], check=True,
                   capture_output=True, env=dict(os.environ, **env))
    good = os.path.join(d, "good", "step-00000002")

    def variant(name):
        path = os.path.join(d, name)
        shutil.copytree(good, path)
        return path

    def case(name, path, mentions, extra=()):
        return Case("checkpoint", name, [f"{bin_dir}/stepc-run", so, "--resume", path,
                                         "--steps", "3", *extra], mentions, env=env,
                    protect=[os.path.join(path, "checkpoint.json")])

    def edited(name, edits, mentions, unsigned=False):
        path = variant(name)
        meta = os.path.join(path, "checkpoint.json")
        with open(meta) as f:
            m = json.load(f)
        for key, value in edits:
            target = m
            keys = key.split(".")
            for k in keys[:-1]:
                target = target[int(k)] if isinstance(target, list) else target[k]
            last = int(keys[-1]) if isinstance(target, list) else keys[-1]
            if value is DELETE:
                del target[last]
            else:
                target[last] = value
        if not unsigned and "checksum" in m:
            m["checksum"] = edit_checkpoint.checksum(m)
        with open(meta, "w") as f:
            json.dump(m, f, indent=1)
        return case(name, path, mentions)

    # Unsigned edits of every kind of field: the checksum catches them.
    for key, value in [("step", 3), ("step", 1), ("world_size", 2), ("sharding", "fsdp:2"),
                       ("model_hash", "0" * 16), ("tensors.0.name", "wtf"),
                       ("tensors.0.shape", [1, 1]), ("shards", []),
                       ("trainer.schedule.lr", 0.5), ("trainer.schedule.steps", 10**6),
                       ("trainer.schedule.seed", 99), ("trainer.data.tokens", 1)]:
        yield edited(f"unsigned-{key}={json.dumps(value)}", [(key, value)], ["fails its checksum"],
                     unsigned=True)
    yield edited("no-checksum", [("checksum", DELETE)], ["no checksum"])
    yield edited("checksum-string", [("checksum", "abc")], ["no checksum"], unsigned=True)
    yield edited("checksum-negative", [("checksum", -1)], ["no checksum"], unsigned=True)
    yield edited("checksum-float", [("checksum", 1.5)], ["no checksum"], unsigned=True)
    # Signed, absurd: named by their field.
    for value in [2**63 - 1, 2**41, 10**15]:
        yield edited(f"step={value}", [("step", value)], ["beyond any run", str(value)])
    for value in [-1, 1.5, "2", None]:
        yield edited(f"step={json.dumps(value)}", [("step", value)], ["step"])
    for field, values, expected in [
            ("lr", [1e300, 1e5, -1, -1e-9], "'lr'"),
            ("steps", [0, -5, 2**41, 1.5, 1e300, "10"], "'steps'"),
            ("warmup", [-1, 2**41, 0.5], "'warmup'"),
            ("min_lr_ratio", [2, -0.1, "x"], "'min_lr_ratio'"),
            ("seed", [-1, 0.5, "7"], "'seed'")]:
        for value in values:
            yield edited(f"schedule.{field}={json.dumps(value)}",
                         [(f"trainer.schedule.{field}", value)], [expected])
    yield edited("schedule-missing-lr", [("trainer.schedule.lr", DELETE)], ["'lr'"])
    # Poisoned tensors with valid checksums.
    shard = "shard-00000-of-00001.bin"
    for tensor, value, mentions in [
            ("wte", "nan", ["'wte'", "non-finite"]),
            ("wte", "inf", ["'wte'", "non-finite"]),
            ("h.0.attn.c_attn.weight", "-inf", ["h.0.attn.c_attn.weight", "non-finite"]),
            ("exp_avg.wpe", "nan", ["exp_avg.wpe", "non-finite"]),
            ("exp_avg_sq.wte", "-1", ["exp_avg_sq.wte", "negative second moment"]),
            ("exp_avg_sq.h.0.ln_1.weight", "nan", ["exp_avg_sq.h.0.ln_1.weight", "non-finite"])]:
        path = variant(f"poison-{tensor}-{value}")
        edit_checkpoint.poison(os.path.join(path, shard), tensor, value)
        yield case(f"poison-{tensor}={value}", path, mentions)
    # A finite edit with valid checksums is a checkpoint like any other.
    path = variant("poison-finite")
    edit_checkpoint.poison(os.path.join(path, shard), "wte", "0.5")
    yield Case("checkpoint", "finite-edit-loads", [f"{bin_dir}/stepc-run", so, "--resume", path,
                                                   "--steps", "3"], [], expect="ok", env=env)


def profile_cases(bin_dir, work, gpt):
    """A run that fails before its first step leaves $STEPC_PROFILE alone."""
    so = os.path.join(work, "gpt-profile.so")
    subprocess.run([f"{bin_dir}/stepc", "--target=cpu", "--profile", gpt, "-o", so], check=True)
    keep = os.path.join(work, "kept-profile.json")
    with open(keep, "w") as f:
        f.write('{"an earlier profile": true}\n')
    for name, extra, mentions in [("bad-lr", ["--lr", "-1"], ["lr"]),
                                  ("missing-data", ["--data", os.path.join(work, "nope.bin")],
                                   ["nope.bin"]),
                                  ("bad-resume", ["--resume", os.path.join(work, "nope-ckpt")],
                                   ["nope-ckpt"])]:
        yield Case("stepc-run", f"profile-kept-{name}",
                   [f"{bin_dir}/stepc-run", so, "--steps", "1", *extra], mentions,
                   protect=[keep], env={"OMP_NUM_THREADS": "1", "STEPC_PROFILE": keep})


def interp_cases(bin_dir, work, model):
    out = os.path.join(work, "interp-out")
    os.makedirs(out, exist_ok=True)
    regular = os.path.join(work, "interp-regular")
    with open(regular, "w") as f:
        f.write("x")
    base = [f"{bin_dir}/stepc-interp", model]
    yield Case("stepc-interp", "steps-zero", base + ["--train-step", "--steps=0", f"--output={out}"],
               ["steps"])
    yield Case("stepc-interp", "output-is-file", base + [f"--output={regular}"], [regular],
               protect=[regular])
    yield Case("stepc-interp", "inputs-missing", base + [f"--inputs={work}/nope"], ["nope"])
    yield Case("stepc-interp", "bad-precision", base + ["--train-step", "--precision=fp16"], ["fp16"])
    yield Case("stepc-interp", "bad-function", base + ["--function=nope"], ["nope"])
    yield Case("stepc-interp", "bad-optimizer-options",
               base + ["--train-step", "--optimizer-options=beta1=7"], ["beta1", "optimizer"])
    yield Case("stepc-interp", "lr-nan", base + ["--train-step", "--lr=nan"], ["lr", "nan"])
    yield Case("stepc-interp", "missing-model", [f"{bin_dir}/stepc-interp", f"{work}/nope.mlir"],
               ["nope.mlir"])
    # Functions it cannot hold: a non-tensor argument or result, a dynamic
    # shape, tensors beyond any machine's memory.
    odd = os.path.join(work, "interp-odd.mlir")
    with open(odd, "w") as f:
        f.write("""func.func @scalar_arg(%n: i32, %y: tensor<2xf32>) -> tensor<2xf32> {
  return %y : tensor<2xf32>
}
func.func @index_result(%y: tensor<2xf32>) -> index {
  %c = arith.constant 0 : index
  return %c : index
}
func.func @dynamic(%y: tensor<?xf32>) -> tensor<?xf32> {
  return %y : tensor<?xf32>
}
func.func @huge(%y: tensor<100000x100000x1000xf32>) -> tensor<100000x100000x1000xf32> {
  return %y : tensor<100000x100000x1000xf32>
}
func.func @huge_result(%y: tensor<2xf32>) -> tensor<2xf32> {
  %b = step.broadcast %y : tensor<2xf32> -> tensor<1048576x524288x2xf32>
  return %y : tensor<2xf32>
}
""")
    for fn, mentions in [("scalar_arg", ["argument #0", "i32"]), ("index_result", ["result #0", "index"]),
                         ("dynamic", ["argument #0", "tensor<?xf32>"]),
                         ("huge", ["memory"]), ("huge_result", ["memory"])]:
        yield Case("stepc-interp", f"function-{fn}", base[:1] + [odd, f"--function={fn}"], mentions,
                   protect=[odd])
    with open(model) as f:
        text = f.read()
    for k, (name, broken, mentions) in enumerate(model_mutations(text)):
        if k % 9:
            continue
        path = os.path.join(work, "models", name, "bad.mlir")
        # (like stepc-opt, it runs the function named: two loss functions are fine)
        yield Case("stepc-interp", name, [f"{bin_dir}/stepc-interp", path], mentions,
                   protect=[path], expect="ok" if name == "two-loss-functions" else "error")


def capi_cases(bin_dir, work, so):
    """The C API abuser runs as one process; each of its cases is one row."""
    d = os.path.join(work, "capi")
    os.makedirs(d, exist_ok=True)
    text = os.path.join(d, "text.so")
    with open(text, "w") as f:
        f.write("not a module\n")
    try:
        p = subprocess.run([f"{bin_dir}/capi_abuse", so, d, text], capture_output=True, text=True,
                           timeout=120, env=dict(os.environ, OMP_NUM_THREADS="1"))
    except subprocess.TimeoutExpired:
        return [("capi", "capi_abuse", "hang", "")]
    rows = []
    for line in p.stdout.splitlines():
        m = re.match(r"(ok|FAIL) (\S+?):?( |$)(.*)", line)
        if m:
            rows.append(("capi", m.group(2), "ok" if m.group(1) == "ok" else "unclear", line))
    if p.returncode < 0 or p.returncode >= 128 or any(x in p.stderr for x in CRASH_MARKERS):
        rows.append(("capi", "capi_abuse-exit", "crash", p.stderr[-2000:]))
    elif p.returncode not in (0, 1):
        rows.append(("capi", "capi_abuse-exit", "wrong", p.stderr[-2000:]))
    return rows


def mpi_cases(bin_dir, work, mpirun, so, so2, so_other, so_tp):
    if not mpirun:
        return
    runner = f"{bin_dir}/stepc-run"
    base = mpirun.split()
    yield Case("mpi", "ranks-different-steps",
               base + ["-np", "1", runner, so2, "--steps", "2", ":", "-np", "1", runner, so2, "--steps", "3"],
               ["--steps", "other training flags"], timeout=120)
    yield Case("mpi", "ranks-save-npy-on-one",
               base + ["-np", "1", runner, so2, "--steps", "1", "--save-npy", os.path.join(work, "npy-one"),
                       ":", "-np", "1", runner, so2, "--steps", "1"],
               ["--save-npy", "other training flags"], timeout=120)
    yield Case("mpi", "ranks-different-seed",
               base + ["-np", "1", runner, so2, "--steps", "1", "--seed", "1", ":", "-np", "1", runner, so2,
                       "--steps", "1"], ["seed", "other training flags"], timeout=120)
    yield Case("mpi", "ranks-different-optimizer",
               base + ["-np", "1", runner, so2, "--steps", "1", ":", "-np", "1", runner, so_other, "--steps", "1"],
               ["different step"], timeout=120)
    yield Case("mpi", "world-too-small", base + ["-np", "1", runner, so2, "--steps", "1"],
               ["2 rank", "compiled for"], timeout=120)
    yield Case("mpi", "world-too-large", base + ["-np", "3", runner, so2, "--steps", "1"],
               ["compiled for"], timeout=120)
    yield Case("mpi", "unsharded-on-two-ranks", base + ["-np", "2", runner, so, "--steps", "1"],
               ["compiled for"], timeout=120)
    # Tensor parallelism: fsdp:2,tp:2 is 4 ranks, not its 2 data ranks.
    yield Case("mpi", "tp-world-too-small", base + ["-np", "2", runner, so_tp, "--steps", "1"],
               ["4 rank", "compiled for"], timeout=120)
    yield Case("mpi", "tp-on-one-rank", base + ["-np", "1", runner, so_tp, "--steps", "1"],
               ["compiled for"], timeout=120)


# --- round three: pipelines, micro-batches, optimizers, dropout, frozen and
# grouped parameters, safetensors, trace and profile outputs, signals -------

def pipeline_flag_cases(bin_dir, work, gpt):
    """stepc's pipeline, micro-batch and target flags: every malformed value
    and every contradiction (gpt-small: 2 blocks, batch 8)."""
    out = os.path.join(work, "pp-output.mlir")
    with open(out, "w") as f:
        f.write("an earlier output\n")
    base = [f"{bin_dir}/stepc", "--target=cpu", gpt, "--emit=mlir", "-o", out]

    def case(name, extra, mentions):
        return Case("stepc", f"pp/{name}", base + extra, mentions, protect=[gpt, out])

    for value in ["pp:0", "pp:1", "pp:-1", "pp:", "pp:2x2", "pp:2,pp:2", "tp:2,pp:2", "pp:2,fsdp:2",
                  "pp:99999999999999999999", "pp:2097152", "PP:2", "pp:2,", "pp:two", "pp:2,tp:0",
                  "ddp:2,pp:0", "hsdp:2x2,pp:1"]:
        yield case(f"shard={value}", [f"--shard={value}"], ["shard", value])
    for value in ["3", "4", "64"]:  # more stages than blocks
        yield case(f"stages-over-blocks-pp:{value}", [f"--shard=pp:{value}"],
                   ["blocks", "stages"])
    for value in ["0", "-1", "abc", "1e3", "99999999999999999999", "2.5", ""]:
        yield case(f"micro-batches={value!r}", [f"--micro-batches={value}"], ["micro-batches"])
    for value in ["3", "5", "16", "9"]:  # not dividing the batch of 8
        yield case(f"micro-batches-not-dividing-{value}", [f"--micro-batches={value}"],
                   ["micro-batches", f"into {value}"])
    pp = ["--shard=pp:2", "--micro-batches=2"]
    for value in ["interleaved:0", "interleaved:1", "interleaved:-1", "interleaved:", "interleaved:abc",
                  "interleaved:65", "1F1B", "gpipe,", "zero_bubble", "", "interleaved:2:2",
                  "interleaved", "1f1b ", "dualpipe"]:
        yield case(f"pp-schedule={value!r}", pp + [f"--pp-schedule={value}"],
                   ["pipeline schedule", "pp-schedule", "interleaved:V", "blocks"])
    yield case("pp-schedule-interleaved-over-blocks", pp + ["--pp-schedule=interleaved:3"],
               ["blocks", "stages"])
    for value in ["0", "2", "1,1", "-1", "a", "1,", ",", "99999999999999999999", "0,1"]:
        yield case(f"pp-stages={value!r}", pp + [f"--pp-stages={value}"], ["pp-stages"])
    for value in ["-1", "2", "abc", "99999999999999999999"]:
        yield case(f"pp-stage={value!r}", pp + [f"--pp-stage={value}"], ["pp-stage"])
    for flag in ["--pp-schedule=gpipe", "--pp-stages=1", "--pp-stage=1"]:
        yield case(f"without-pipeline{flag}", [flag], [flag.split("=")[0], "pipeline"])
    yield case("sequence-parallel-without-tp", ["--sequence-parallel"], ["sequence-parallel"])
    yield case("fsdp-reshard-without-fsdp", ["--fsdp-reshard"], ["fsdp-reshard"])
    for value in ["native2", "", "x86-64-v9", "aarch64", "NATIVE"]:
        yield case(f"cpu={value!r}", [f"--cpu={value}"], ["cpu"])
    yield case("arch-on-cpu", ["--arch=sm_90"], ["arch"])
    for value in ["sm_abc", "sm_", "compute_90", "90", ""]:
        yield Case("stepc", f"pp/arch={value!r}", [f"{bin_dir}/stepc", "--target=cuda",
                                                   "--cuda-emulation", gpt, "--emit=source",
                                                   f"--arch={value}", "-o", out],
                   ["arch"], protect=[gpt, out])
    for value in ["max-grad-norm=-1", "max-grad-norm=nan", "max-grad-norm=abc", "beta1=-0.1",
                  "weight-decay=-1", "epsilon=-1", "ns-steps=-1", "lr=1", "beta2=1",
                  "muon-nesterov=maybe"]:
        yield case(f"optimizer-options={value}", [f"--optimizer-options={value}"],
                   ["optimizer", value.split("=")[0]])
    pareto = os.path.join(work, "no", "such", "pareto")
    yield case("report-pareto-in-missing-dir", [f"--report-pareto={pareto}"],
               ["report-pareto", "no/such"])
    yield case("report-pareto-into-directory", [f"--report-pareto={work}/"],
               ["report-pareto", work])


def attribute_model_cases(bin_dir, work, gpt):
    """Models whose dropout, parameter-group, frozen-parameter and attention
    mask attributes are out of range: a compile error at the source line."""
    with open(gpt) as f:
        text = f.read()
    out = os.path.join(work, "attr-output.so")
    wte = '#step.param<"wte", normal(0.02)>'
    ln = '#step.param<"h.0.ln_1.weight", ones, block 0>'
    attn = "step.attention %h0_q, %h0_k, %h0_v heads"
    m = re.search(r"%h0_att = step.attention (%\S+), (%\S+), (%\S+) heads 4 kv_heads 4 head_dim 16 "
                  r"causal : \(([^)]*)\)", text)
    edits = []
    for value in ["-1.0", "nan", "inf", "-0.5", "1e300"]:
        edits.append((f"weight-decay-{value}", wte, f'#step.param<"wte", normal(0.02), weight_decay {value}>',
                      ["weight_decay", "weight decay"]))
        edits.append((f"lr-scale-{value}", wte, f'#step.param<"wte", normal(0.02), lr_scale {value}>',
                      ["lr_scale", "learning-rate scale"]))
    for value in ["abc", "[1]", '"x"']:
        edits.append((f"weight-decay-not-a-number-{value}", wte,
                      f'#step.param<"wte", normal(0.02), weight_decay {value}>', ["bad.mlir:"]))
    edits.append(("frozen-twice", ln, '#step.param<"h.0.ln_1.weight", ones, block 0, frozen, frozen>',
                  ["bad.mlir:"]))
    edits.append(("block-negative", ln, '#step.param<"h.0.ln_1.weight", ones, block -1>', ["bad.mlir:"]))
    edits.append(("init-unknown", ln, '#step.param<"h.0.ln_1.weight", twos, block 0>', ["bad.mlir:"]))
    edits.append(("normal-negative-std", wte, '#step.param<"wte", normal(-1.0)>', ["bad.mlir:"]))
    if m:
        q, k, v, types = m.groups()
        whole = m.group(0)
        for label, shape in (("rank3", "8x64x64"), ("keys-short", "8x1x1x63"), ("batch-3", "3x1x1x64"),
                             ("heads-2", "8x2x64x64"), ("i32", "8x1x1x64xi32")):
            mtype = f"tensor<{shape}>" if shape.endswith("i32") else f"tensor<{shape}xf32>"
            decl = f"%hm_{label} = step.constant dense<0.0> : {mtype}\n  " if not shape.endswith("i32") \
                else f"%hm_{label} = step.constant dense<0> : {mtype}\n  "
            edits.append((f"attention-mask-{label}", whole,
                          decl + whole.replace(f"{q}, {k}, {v} heads", f"{q}, {k}, {v} mask %hm_{label} heads")
                                      .replace(f"({types})", f"({types}, {mtype})"),
                          ["bad.mlir:", "mask"]))
    for value in ["1.0", "-0.1", "nan", "2"]:
        edits.append((f"dropout-rate-{value}", "%x = step.add %tok_emb, %pos_emb : tensor<8x64x64xf32>",
                      "%x0 = step.add %tok_emb, %pos_emb : tensor<8x64x64xf32>\n"
                      f"  %x = step.dropout %x0 rate {value} : tensor<8x64x64xf32>",
                      ["bad.mlir:", "rate"]))
    for name, old, new, mentions in edits:
        if old not in text:
            continue
        path = os.path.join(work, f"attr-{name}.mlir")
        with open(path, "w") as f:
            f.write(text.replace(old, new, 1).replace("bad.mlir", ""))
        bad = os.path.join(work, "bad.mlir")
        yield Case("stepc", f"attr/{name}", [f"{bin_dir}/stepc", "--target=cpu", path, "-o", out],
                   mentions + [os.path.basename(path) + ":"], protect=[path])


def safetensors_runtime_cases(bin_dir, work, so, good):
    """stepc-run --init-safetensors on a file of the model's parameters cut
    and edited every way; --save-safetensors, --trace, --summary into places
    that cannot take them; --steps 0 (no step: the loaded weights sampled or
    saved), which must succeed."""
    d = os.path.join(work, "st")
    os.makedirs(d, exist_ok=True)
    env = {"OMP_NUM_THREADS": "1"}
    run_ = [f"{bin_dir}/stepc-run", so, "--steps", "1"]

    def case(name, extra, mentions, expect="error", protect=()):
        return Case("stepc-run", f"st/{name}", run_ + extra, mentions, expect=expect, env=env,
                    protect=protect)

    with open(good, "rb") as f:
        blob = f.read()
    n = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]

    def write(name, head=None, body=None, raw=None):
        path = os.path.join(d, f"{name}.safetensors")
        if raw is None:
            text = json.dumps(header if head is None else head).encode()
            text += b" " * ((8 - len(text) % 8) % 8)
            raw = struct.pack("<Q", len(text)) + text + (data if body is None else body)
        with open(path, "wb") as f:
            f.write(raw)
        return path

    for k, size in enumerate([0, 4, 8, 9, 100, n // 2, n + 7, n + 8, n + 9, n + 8 + len(data) // 3,
                              len(blob) - 4, len(blob) - 1]):
        path = write(f"cut-{k}", raw=blob[:size])
        yield case(f"truncated-at-{size}", ["--init-safetensors", path],
                   [path, "truncated", "header length", "shorter"], protect=[path])
    names = [k for k in header if k != "__metadata__"]
    # A matrix that is not square: its shape reversed is another shape.
    first = next(k for k in names if len(header[k]["shape"]) == 2 and
                 header[k]["shape"][0] != header[k]["shape"][1])
    import copy

    def edited(label, fn, mentions):
        h = copy.deepcopy(header)
        fn(h)
        path = write(label, head=h)
        return case(label, ["--init-safetensors", path], mentions + [path], protect=[path])

    shape = header[first]["shape"]
    yield edited("shape-transposed", lambda h: h[first].update(shape=list(reversed(shape))),
                 [first, "shape"])
    yield edited("shape-rank-up", lambda h: h[first].update(shape=shape + [1]), [first, "shape"])
    yield edited("shape-negative", lambda h: h[first].update(shape=[-1] + shape[1:]), [first, "shape"])
    yield edited("shape-huge", lambda h: h[first].update(shape=[2**62] + shape[1:]), [first])
    yield edited("shape-string", lambda h: h[first].update(shape="[1]"), [first])
    for dtype in ["I32", "U8", "F8_E4M3", "f32", "", "BOOL"]:
        yield edited(f"dtype-{dtype or 'empty'}", lambda h, t=dtype: h[first].update(dtype=t),
                     [first, "dtype"])
    for label, offsets in (("offsets-reversed", lambda o: [o[1], o[0]]),
                           ("offsets-past-end", lambda o: [o[0] + len(data), o[1] + len(data)]),
                           ("offsets-short", lambda o: [o[0], o[1] - 4]),
                           ("offsets-negative", lambda o: [-4, o[1]]),
                           ("offsets-one", lambda o: [o[0]]),
                           ("offsets-float", lambda o: [float(o[0]), o[1]])):
        yield edited(label, lambda h, f=offsets: h[first].update(
            data_offsets=f(header[first]["data_offsets"])), [first, "data_offsets", "truncated"])
    for field in ["dtype", "shape", "data_offsets"]:
        yield edited(f"no-{field}", lambda h, f=field: h[first].pop(f), [first])
    yield edited("missing-tensor", lambda h: h.pop(first), [first])
    yield edited("tensor-is-a-list", lambda h: h.update({first: [1, 2]}), [first])
    path = write("header-not-object", raw=struct.pack("<Q", 8) + b"[1,2,3] " + data)
    yield case("header-not-object", ["--init-safetensors", path], [path, "JSON object"])
    path = write("header-not-json", raw=struct.pack("<Q", 8) + b"{{{{{{{{" + data)
    yield case("header-not-json", ["--init-safetensors", path], [path, "JSON object"])
    path = write("header-length-huge", raw=struct.pack("<Q", 2**63) + blob[8:])
    yield case("header-length-huge", ["--init-safetensors", path], [path, "header length"])
    nan = bytearray(data)
    o = header[first]["data_offsets"][0]
    nan[o:o + 4] = struct.pack("<f", float("nan"))
    path = write("nan-weight", body=bytes(nan))
    yield case("nan-weight", ["--init-safetensors", path], [path, "nan"])
    inf = bytearray(data)
    inf[o:o + 4] = struct.pack("<f", float("-inf"))
    path = write("inf-weight", body=bytes(inf))
    yield case("inf-weight", ["--init-safetensors", path], [path, "inf"])
    # A file with a tensor the model lacks loads the rest and says so.
    h = copy.deepcopy(header)
    h["not.in.the.model"] = {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}
    path = write("extra-tensor", head=h)
    yield case("extra-tensor-warns", ["--init-safetensors", path], ["not.in.the.model"],
               expect="ok")
    yield case("extra-tensor-named", ["--init-safetensors", path, "--lr", "-1"], ["lr"])
    # --steps 0: nothing trained; the weights loaded are saved unchanged.
    copy_out = os.path.join(d, "roundtrip.safetensors")
    yield Case("stepc-run", "st/steps-0-save", [f"{bin_dir}/stepc-run", so, "--steps", "0",
                                                "--init-safetensors", good, "--save-safetensors",
                                                copy_out], [], expect="ok", env=env, protect=[good])
    yield Case("stepc-run", "st/steps-0-sample", [f"{bin_dir}/stepc-run", so, "--steps", "0",
                                                  "--init-safetensors", good, "--sample", "5"],
               [], expect="ok", env=env, protect=[good])
    # Outputs into places that cannot take them; an existing file survives a
    # failed run.
    keep = os.path.join(d, "keep.safetensors")
    with open(keep, "wb") as f:
        f.write(blob)
    yield case("save-kept-on-bad-flag", ["--save-safetensors", keep, "--lr", "nan"], ["lr"],
               protect=[keep])
    yield case("save-into-directory", ["--save-safetensors", d], ["save-safetensors", d])
    yield case("save-in-missing-dir", ["--save-safetensors", os.path.join(d, "no/x.safetensors")],
               ["save-safetensors", "no"])
    fifo = os.path.join(d, "reader-less.fifo")
    if not os.path.exists(fifo):
        os.mkfifo(fifo)
    for flag in ["--save-safetensors", "--trace", "--summary", "--metrics", "--plot"]:
        yield case(f"{flag.lstrip('-')}-into-fifo", [flag, fifo], [fifo, "FIFO"])
    yield case("init-safetensors-fifo", ["--init-safetensors", fifo], [fifo])
    yield case("init-safetensors-directory", ["--init-safetensors", d], [d])
    for value in ["0:1", "3:2", "a:b", ":", "-1:2", "1:99999999999999999999", "1:2:3", "all:",
                  "2:5"]:
        yield case(f"trace-steps={value}", ["--trace", os.path.join(d, "t.json"),
                                            "--trace-steps", value], ["trace-steps"])
    yield case("trace-into-directory", ["--trace", d], ["trace", d])
    yield case("trace-in-missing-dir", ["--trace", os.path.join(d, "no/t.json")], ["trace", "no"])
    for value in ["nan", "-1", "inf", "abc"]:
        yield case(f"peak-tflops={value}", ["--peak-tflops", value], ["peak-tflops", "peak_tflops"])
    for value in ["-1", "abc"]:
        yield case(f"sample-every={value}", ["--sample-every", value],
                   ["sample-every", "sample_every"])
    yield case("save-outputs-is-file", ["--save-outputs", so], ["save-outputs", so], protect=[so])


def signal_cases(bin_dir, work, so):
    """SIGINT and SIGTERM during training with a checkpoint directory: the
    run stops at a step boundary, writes a checkpoint and says so (exit
    status nonzero: it did not finish); a run resumed from it finishes."""
    d = os.path.join(work, "signals")
    os.makedirs(d, exist_ok=True)
    env = {"OMP_NUM_THREADS": "1"}
    for sig in ["INT", "TERM"]:
        for label, extra in (("checkpoint", ["--checkpoint-dir", os.path.join(d, f"ckpt-{sig}")]),
                             ("metrics", ["--metrics", os.path.join(d, f"m-{sig}.jsonl"),
                                          "--save-npy", os.path.join(d, f"npy-{sig}")])):
            # (timeout exits 124 once it has signalled: an error status.
            # --foreground: one signal to stepc-run, not a second to its
            # process group, which the default action would take.)
            yield Case("stepc-run", f"signal/{sig}-{label}",
                       ["timeout", "--foreground", "-s", sig, "--kill-after=60", "3",
                        f"{bin_dir}/stepc-run", so, "--steps", "100000"] + extra,
                       [f"stopped by SIG{sig} after step"], env=env, timeout=90)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--examples", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--mpirun", default="")
    ap.add_argument("--only", default="")
    ap.add_argument("-v", action="store_true")
    args = ap.parse_args()
    bin_dir, work = args.bin, os.path.abspath(args.work)
    os.makedirs(work, exist_ok=True)
    model = os.path.join(work, "model.mlir")
    shutil.copy(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Transforms",
                             "Inputs", "remat-mlp.mlir"), model)
    gpt = os.path.join(args.examples, "gpt-small", "model.mlir")
    so = os.path.join(work, "gpt.so")
    so2 = os.path.join(work, "gpt-fsdp2.so")
    so_other = os.path.join(work, "gpt-fsdp2-beta.so")
    so_tp = os.path.join(work, "gpt-fsdp2-tp2.so")
    for out, extra in ((so, []), (so2, ["--shard=fsdp:2"]),
                       (so_other, ["--shard=fsdp:2", "--optimizer-options=beta1=0.8"]),
                       (so_tp, ["--shard=fsdp:2,tp:2"])):
        subprocess.run([f"{bin_dir}/stepc", "--target=cpu", gpt, "-o", out] + extra, check=True)
    subprocess.run([f"{bin_dir}/stepc", "--target=cpu", gpt, "--emit=mlir", "-o",
                    os.path.join(work, "gpt.mlir"),
                    f"--report={work}/gpt.json"], check=True)
    with open(f"{work}/gpt.json") as f:
        tokens = json.load(f)["tokens_per_step"]
    batch, seq = 8, tokens // 8
    vocab = int(re.search(r"tensor<(\d+)x\d+xf32> \{step.param = #step.param<\"wte\"",
                          open(gpt).read()).group(1))

    cases = []
    cases += compiler_cases(bin_dir, work, model)
    cases += stepc_flag_cases(bin_dir, work, model)
    small_so = os.path.join(work, "mlp.so")
    subprocess.run([f"{bin_dir}/stepc", "--target=cpu", model, "-o", small_so], check=True)
    cases += runtime_cases(bin_dir, work, so, small_so, batch, seq, vocab)
    cases += checkpoint_cases(bin_dir, work, so)
    cases += profile_cases(bin_dir, work, gpt)
    cases += interp_cases(bin_dir, work, model)
    cases += mpi_cases(bin_dir, work, args.mpirun, so, so2, so_other, so_tp)
    cases += pipeline_flag_cases(bin_dir, work, gpt)
    cases += attribute_model_cases(bin_dir, work, gpt)
    good = os.path.join(work, "gpt.safetensors")
    subprocess.run([f"{bin_dir}/stepc-run", so, "--steps", "1", "--save-safetensors", good],
                   check=True, capture_output=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    cases += safetensors_runtime_cases(bin_dir, work, so, good)
    cases += signal_cases(bin_dir, work, so)
    results = []
    for case in cases:
        if args.only and not f"{case.tool}/{case.name}".startswith(args.only):
            continue
        outcome, out = run(case)
        results.append((case.tool, case.name, outcome, out))
    if not args.only or args.only.startswith("capi"):
        results += capi_cases(bin_dir, work, so)

    classes = ["ok", "crash", "hang", "data loss", "silent", "unclear", "wrong"]
    tools = sorted({r[0] for r in results})
    print(f"{'tool':14}" + "".join(f"{c:>11}" for c in classes))
    for tool in tools:
        counts = [sum(1 for r in results if r[0] == tool and r[2] == c) for c in classes]
        print(f"{tool:14}" + "".join(f"{n:>11}" for n in counts))
    totals = [sum(1 for r in results if r[2] == c) for c in classes]
    print(f"{'total':14}" + "".join(f"{n:>11}" for n in totals))
    bad = [r for r in results if r[2] != "ok"]
    for tool, name, outcome, out in bad:
        print(f"\n{outcome.upper()}: {tool} {name}\n  " + out.strip()[-600:].replace("\n", "\n  "))
    if args.v:
        for tool, name, outcome, out in results:
            print(f"{outcome:8} {tool} {name}: {out.strip().splitlines()[-1] if out.strip() else ''}")
    print(f"\n{len(results)} cases, {len(results) - len(bad)} ok, {len(bad)} not")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()

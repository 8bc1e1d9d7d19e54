#!/usr/bin/env python3
"""Every shell command README.md and docs/ print, run as printed or covered.

Extracts the commands of every ```sh / ```bash block and every `$ ` line of a
transcript block in README.md and docs/**/*.md, then, document by document
and in order, either runs each one as printed (in a fresh working directory
that holds the repository's top-level folders and `build`) or finds it in
COVERED, which names the test or script that runs it instead (and why it is
not run here: a GPU, the network, minutes of benchmark, a system path). A
command in neither place fails the test, so a new doc command is either
runnable as printed or says where it is checked.

Two rewrites keep the test off the machine's own files: absolute `/tmp/`
paths become the working directory's `tmp/`, and `-o /dev/null` a private
file (sessions run as root). `make demo` runs as EQUIVALENT says. PATH puts the build's
bin/ first (as an installed stepc would be) and then the system's, as on a
fresh Debian machine.

usage: doc_commands.py REPO BUILD WORK [--only DOC] [--list]
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import time

# (pattern, test or script that covers it, why it is not run here)
COVERED = [
    (r"^make test\b", ".ci/run", "the command that runs this test"),
    (r"^bench/setup-peers\.sh", "bench/setup-peers.sh", "downloads about 3 GB (network)"),
    (r"bench/cpu_step/bench\.py", "bench/cpu_step/bench.py", "a benchmark of minutes"),
    (r"^scripts/gpu-bundle\.sh", "scripts/gpu-check.sh", "needs a GPU"),
    (r"^build/bin/stepc-run gpt2\.so\b", "scripts/gpu-check.sh",
     "needs a GPU (the step.so targets CUDA)"),
    (r"^cmake --install build --prefix /opt/", "test/Tools/install.test",
     "writes to a system path; install.test installs to a private prefix"),
    (r"^mpirun .* python3 train\.py", "test/Python/export.test",
     "the user's own train.py; export.test runs the Python host under mpirun"),
    (r"^stepc-run out/step\.so --init-safetensors", "test/Python/safetensors.test",
     "needs out/ from the user's stepc.export above; safetensors.test runs it on an exported GPT"),
    (r"^python3 -m stepc\.convert", "test/Python/safetensors.test",
     "needs out/ from the user's stepc.export above; safetensors.test runs it on an exported GPT"),
    # Run by a test with the same arguments: each documented command runs
    # once in the suite.
    (r"^/usr/bin/python3 scripts/torch_check\.py (--backend cpu )?--preset llama-debug$|"
     r"^/usr/bin/python3 scripts/torch_check\.py --arch gpt --vocab 97 --seq 17 --dim 48 "
     r"--layers 3 --heads 3 --batch 5$", "test/Examples/torch_check_configs.txt",
     "torch-check.test runs it with these arguments (torch_check_configs.txt)"),
    (r"^build/bin/stepc-interp examples/gpt-small/model\.mlir --train-step --steps=50 --lr=1e-2$",
     "test/Examples/interp-training.test", "interp-training.test runs it and checks the loss falls"),
    (r"^PYTHONPATH=build/python python3 examples/pytorch/train\.py(\s|$)", "test/Python/export.test",
     "export.test runs the script (40 of its steps) and checks its log"),
    (r"--batch=128 .*cap128\.so|^build/bin/stepc-run cap128\.so", "test/Runtime/remat.test",
     "about 3 minutes at batch 128; remat.test checks budgets at small batches, "
     "not these figures"),
]

# Commands run as something equivalent: (pattern, what runs instead, why).
EQUIVALENT = [
    (r"^make demo\b", "STEPS=100 scripts/demo.sh build",
     "make demo = install, build (done: this test runs in the build), then scripts/demo.sh; "
     "100 of its 300 steps: the same compile, training, samples, metrics and plot in a "
     "third of the suite's longest minute (doc-commands.test checks the loss it reaches "
     "by then; the README's figure after 300 steps is not checked)"),
]

SHELL_LANGS = {"sh", "bash", "shell"}


def doc_files(repo):
    docs = [os.path.join(repo, "README.md")]
    docs += sorted(glob.glob(os.path.join(repo, "docs", "**", "*.md"), recursive=True))
    return docs


def join_continuations(lines):
    out, pending = [], ""
    for line in lines:
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        out.append(pending + line)
        pending = ""
    if pending:
        out.append(pending)
    return out


def commands(path):
    """The commands a document prints, in order: (line number, command)."""
    found, block, lang, start = [], None, None, 0
    for number, line in enumerate(open(path, encoding="utf-8"), 1):
        stripped = line.strip()
        if stripped.startswith("```"):
            if block is None:
                block, lang, start = [], stripped[3:].strip(), number
                continue
            found += block_commands(block, lang, start)
            block = None
            continue
        if block is not None:
            block.append(line.rstrip("\n"))
    return found


def block_commands(block, lang, start):
    if lang in SHELL_LANGS:
        lines = [l for l in block if l.strip() and not l.lstrip().startswith("#")]
        return [(start, l.strip()) for l in join_continuations(lines)]
    if lang == "":  # a transcript: `$ command` lines, continued with `\`
        cmds, current = [], None
        for l in block:
            if l.startswith("$ "):
                current = [l[2:]]
                cmds.append(current)
            elif current is not None and current[-1].rstrip().endswith("\\"):
                current.append(l)
            else:
                current = None
        return [(start, join_continuations(c)[0].strip()) for c in cmds]
    return []


def coverage(repo, command):
    for pattern, where, why in COVERED:
        if re.search(pattern, command):
            if not os.path.exists(os.path.join(repo, where)):
                sys.exit(f"doc_commands: COVERED names {where}, which does not exist")
            return where, why
    return None


def workdir(repo, build, work):
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(os.path.join(work, "tmp"))
    for name in os.listdir(repo):
        if name in ("build", ".git") or name.startswith("."):
            continue
        os.symlink(os.path.join(repo, name), os.path.join(work, name))
    os.symlink(os.path.abspath(build), os.path.join(work, "build"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("repo")
    ap.add_argument("build")
    ap.add_argument("work")
    ap.add_argument("--only", help="one document (path relative to REPO)")
    ap.add_argument("--list", action="store_true", help="list, run nothing")
    a = ap.parse_args()
    repo, build = os.path.abspath(a.repo), os.path.abspath(a.build)
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([os.path.join(build, "bin"), "/usr/local/sbin",
                                   "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"])
    env.pop("PYTHONPATH", None)
    ran = covered = 0
    for doc in doc_files(repo):
        rel = os.path.relpath(doc, repo)
        if a.only and rel != a.only:
            continue
        cmds = commands(doc)
        if not cmds:
            continue
        work = os.path.join(os.path.abspath(a.work), rel.replace("/", "_"))
        if not a.list:
            workdir(repo, build, work)
        done = set()  # a command printed twice in one document runs once
        for line, cmd in cmds:
            where = coverage(repo, cmd)
            if where:
                covered += 1
                print(f"{rel}:{line}: covered by {where[0]} ({where[1]}): {cmd}")
                continue
            shell = cmd
            for pattern, instead, why in EQUIVALENT:
                if re.search(pattern, cmd):
                    shell = instead
                    print(f"{rel}:{line}: {cmd} runs as {instead} ({why})")
            if shell in done:
                print(f"{rel}:{line}: ran above: {cmd}")
                continue
            done.add(shell)
            ran += 1
            if a.list:
                print(f"{rel}:{line}: run: {shell}")
                continue
            shell = shell.replace("/tmp/", os.path.join(work, "tmp") + "/")
            shell = shell.replace("-o /dev/null", "-o " + os.path.join(work, "discard"))
            begin = time.time()
            proc = subprocess.run(["bash", "-o", "pipefail", "-c", shell], cwd=work, env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, timeout=600)
            took = time.time() - begin
            if proc.returncode != 0:
                tail = proc.stdout.decode(errors="replace")[-3000:]
                failed = f"{rel}:{line}: FAILED (exit {proc.returncode}, {took:.1f} s): {cmd}\n{tail}"
                print(failed)
                print(failed, file=sys.stderr)  # what lit shows
                return 1
            print(f"{rel}:{line}: ran ({took:.1f} s): {cmd}")
    print(f"doc_commands: {ran} run as printed, {covered} covered elsewhere")
    return 0


if __name__ == "__main__":
    sys.exit(main())

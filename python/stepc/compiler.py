"""stepc.compile: the `stepc` compiler run from Python on an exported model.

    so = stepc.compile(exported, "out/step.so", target="cpu", shard="fsdp:2")

Keyword arguments are stepc's flags (`remat="block"` is `--remat=block`,
added to those an export made from a torch.optim optimizer carries,
`sequence_parallel=True` is `--sequence-parallel`). The binary is
$STEPC_BIN/stepc, else the one beside the package (build/bin from
build/python, <prefix>/bin when installed), else `stepc` on PATH. A failed
compile is a StepcError carrying the compiler's message.
"""

import os
import shutil
import subprocess

from .errors import StepcError


def compiler_path():
    env = os.environ.get("STEPC_BIN")
    if env and os.path.exists(os.path.join(env, "stepc")):
        return os.path.join(env, "stepc")
    here = os.path.dirname(os.path.abspath(__file__))
    for up in (("..", "..", "bin"), ("..", "..", "..", "..", "bin")):
        path = os.path.normpath(os.path.join(here, *up, "stepc"))
        if os.path.exists(path):
            return path
    found = shutil.which("stepc")
    if not found:
        raise StepcError("stepc not found (set STEPC_BIN to the directory holding it)")
    return found


def compile(model, output, **flags):
    """Compiles `model` (an Exported, or a model.mlir path) into `output`."""
    mlir = getattr(model, "mlir", model)
    command = [compiler_path(), os.fspath(mlir), "-o", os.fspath(output)]
    # An export's optimizer flags (stepc.export(..., optimizer=opt)) first;
    # the caller's keywords override them.
    flags = {**getattr(model, "compile_flags", {}), **flags}
    for key, value in flags.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            command.append(flag)
        elif value not in (False, None):
            command.append(f"{flag}={value}")
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise StepcError(done.stderr.strip() or f"stepc exited with {done.returncode}")
    return os.fspath(output)

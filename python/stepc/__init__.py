"""stepc from Python: import a PyTorch module (`export`), train the compiled
step (`Session`), and move weights as state_dicts and safetensors."""

import importlib
import os


def _choose_blas_kernels():
    """OPENBLAS_CORETYPE from this CPU's features, as the runtime sets it
    (runtime/device/cpu_threads.cc, ChooseBlasKernels) before a step loads OpenBLAS:
    numpy loads OpenBLAS first in a Python host, and OpenBLAS picks its
    kernels once, by CPU model, falling back to SSE3 on a CPU newer than
    itself. So `import stepc` before numpy keeps the fast kernels."""
    if os.environ.get("OPENBLAS_CORETYPE"):
        return
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((l.split(":", 1)[1].split() for l in f if l.startswith("flags")), [])
    except OSError:
        return
    has = set(flags).issuperset
    if has({"avx512_bf16"}):
        os.environ["OPENBLAS_CORETYPE"] = "Cooperlake"
    elif has({"avx512f", "avx512bw", "avx512vl", "avx512dq"}):
        os.environ["OPENBLAS_CORETYPE"] = "SkylakeX"
    elif has({"avx2", "fma"}):
        os.environ["OPENBLAS_CORETYPE"] = "Haswell"


_choose_blas_kernels()

from .errors import ExportError, StepcError

__all__ = ["export", "Exported", "ExportError", "compile", "Session", "train", "StepcError",
           "safetensors", "hf", "nn"]

# torch is imported only by what needs it: a Session runs without it.
_LAZY = {"export": "exporter", "Exported": "exporter", "Session": "session", "train": "session",
         "compile": "compiler"}


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module("." + _LAZY[name], __name__), name)
    if name in ("safetensors", "hf", "nn"):
        return importlib.import_module("." + name, __name__)
    raise AttributeError(name)

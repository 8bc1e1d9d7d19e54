"""stepc from Python: import a PyTorch module (`export`), train the compiled
step (`Session`), and move weights as state_dicts and safetensors."""

import importlib

from .errors import ExportError, StepcError

__all__ = ["export", "Exported", "ExportError", "compile", "Session", "train", "StepcError",
           "safetensors", "hf"]

# torch is imported only by what needs it: a Session runs without it.
_LAZY = {"export": "exporter", "Exported": "exporter", "Session": "session", "train": "session",
         "compile": "compiler"}


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module("." + _LAZY[name], __name__), name)
    if name in ("safetensors", "hf"):
        return importlib.import_module("." + name, __name__)
    raise AttributeError(name)

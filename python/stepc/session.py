"""stepc.Session: a compiled step.so trained from Python, over the runtime's C
API (stepc_runtime.h) through ctypes.

ctypes, not a compiled extension: the C API is already the stable boundary
(plain C, statuses and messages, no exceptions cross it), ctypes is in the
standard library, and the package then needs no build step per Python
version. Each call copies tensors once, as the C API does.

    s = stepc.Session("out/step.so")   # out: stepc.export's (export_dir= if elsewhere)
    s.load_state_dict(model.state_dict())
    loss, norm = s.step(idx=x, targets=y, lr=6e-4)
    model.load_state_dict(s.state_dict())
"""

import ctypes
import json
import os

import numpy as np

from . import safetensors
from .errors import StepcError

_ERROR_LEN = 4096
_F32, _I32 = 0, 3


def _library_path():
    """libstepc_runtime.so: $STEPC_RUNTIME_LIBRARY, else beside the package in
    the build tree (build/python/stepc -> build/lib) or an install prefix
    (lib/python3/dist-packages/stepc -> lib)."""
    env = os.environ.get("STEPC_RUNTIME_LIBRARY")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    for up in (("..", "..", "lib"), ("..", "..", ".."), ("..", "..", "..", "lib")):
        path = os.path.normpath(os.path.join(here, *up, "libstepc_runtime.so"))
        if os.path.exists(path):
            return path
    return "libstepc_runtime.so"


_lib = None


def _runtime():
    global _lib
    if _lib is None:
        lib = ctypes.CDLL(_library_path(), mode=ctypes.RTLD_GLOBAL)
        p, c, i32, i64, sz = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int32, ctypes.c_int64, \
            ctypes.c_size_t
        fp = ctypes.POINTER(ctypes.c_float)
        sigs = {
            "stepc_session_create": (p, [c, c, sz]),
            "stepc_train_run": (ctypes.c_int, [c, c, c, sz]),
            "stepc_session_destroy": (None, [p]),
            "stepc_session_init_params": (ctypes.c_int, [p, ctypes.c_uint64, c, sz]),
            "stepc_session_set_input": (ctypes.c_int, [p, c, ctypes.POINTER(i32), sz, c, sz]),
            "stepc_session_set_input_f32": (ctypes.c_int, [p, c, fp, sz, c, sz]),
            "stepc_session_num_inputs": (ctypes.c_int, [p, ctypes.POINTER(i32), c, sz]),
            "stepc_session_input_name": (ctypes.c_int, [p, i32, ctypes.POINTER(c), c, sz]),
            "stepc_session_input_info": (ctypes.c_int, [p, c, ctypes.POINTER(i32),
                                                        ctypes.POINTER(i32), ctypes.POINTER(i64),
                                                        c, sz]),
            "stepc_session_step": (ctypes.c_int, [p, ctypes.c_float, fp, fp, c, sz]),
            "stepc_session_eval": (ctypes.c_int, [p, fp, c, sz]),
            "stepc_session_eval_logits": (ctypes.c_int, [p, fp, fp, sz, c, sz]),
            "stepc_session_row_logits": (ctypes.c_int, [p, c, ctypes.POINTER(i32), sz, fp, sz,
                                                        c, sz]),
            "stepc_session_logits_shape": (ctypes.c_int, [p, ctypes.POINTER(i32),
                                                          ctypes.POINTER(i64), c, sz]),
            "stepc_session_read_param": (ctypes.c_int, [p, c, fp, sz, c, sz]),
            "stepc_session_write_param": (ctypes.c_int, [p, c, fp, sz, c, sz]),
            "stepc_session_num_tensors": (ctypes.c_int, [p, ctypes.POINTER(i32), c, sz]),
            "stepc_session_tensor_info": (ctypes.c_int, [p, i32, ctypes.POINTER(c),
                                                         ctypes.POINTER(i32), ctypes.POINTER(i32),
                                                         ctypes.POINTER(i64), c, sz]),
            "stepc_session_steps_done": (ctypes.c_int, [p, ctypes.POINTER(i64), c, sz]),
            "stepc_session_num_metrics": (ctypes.c_int, [p, ctypes.POINTER(i32), c, sz]),
            "stepc_session_metric_info": (ctypes.c_int, [p, i32, ctypes.POINTER(c),
                                                         ctypes.POINTER(i32),
                                                         ctypes.POINTER(i64), c, sz]),
            "stepc_session_last_metrics": (ctypes.c_int, [p, fp, sz, c, sz]),
            "stepc_session_ranks": (ctypes.c_int, [p, ctypes.POINTER(i32), ctypes.POINTER(i32),
                                                   ctypes.POINTER(i32), c, sz]),
            "stepc_session_save_checkpoint": (ctypes.c_int, [p, c, c, c, sz]),
            "stepc_session_load_checkpoint": (ctypes.c_int, [p, c, ctypes.POINTER(i64), c, sz,
                                                             c, sz]),
        }
        for name, (res, args) in sigs.items():
            f = getattr(lib, name)
            f.restype, f.argtypes = res, args
        _lib = lib
    return _lib


def train(path, **options):
    """Runs stepc-run's whole training job on the step.so at `path` in this
    process: options as stepc-run's flags, by keyword (`steps=100`,
    `metrics="m.jsonl"`, `checkpoint_dir="ckpt"`, `val_fraction=0.1`, ...).
    Under mpirun every rank calls it. Raises StepcError on failure."""
    import json
    lib = _runtime()
    err = ctypes.create_string_buffer(_ERROR_LEN)
    if lib.stepc_train_run(os.fsencode(path), json.dumps(options).encode(), err, _ERROR_LEN):
        raise StepcError(err.value.decode(errors="replace"))


def _to_numpy(value):
    """A torch tensor or array-like as a NumPy array (no torch import)."""
    if hasattr(value, "detach") and hasattr(value, "cpu"):
        value = value.detach().cpu().numpy()
    return np.asarray(value)


class Session:
    """One rank's training session of a compiled step (see the module doc)."""

    def __init__(self, path, export_dir=None, seed=0):
        # stepc.export's directory: given, else the step.so's own when it
        # holds the export's export.json (the usual out/step.so).
        if export_dir is None:
            beside = os.path.dirname(os.path.abspath(os.fspath(path)))
            if os.path.isfile(os.path.join(beside, "export.json")):
                export_dir = beside
        self._lib = _runtime()
        self._err = ctypes.create_string_buffer(_ERROR_LEN)
        self._s = self._lib.stepc_session_create(os.fsencode(path), self._err, _ERROR_LEN)
        if not self._s:
            raise StepcError(self._err.value.decode(errors="replace"))
        self._tensors = self._tensor_table()
        self._inputs = self._input_table()
        rank, world, tp = ctypes.c_int32(), ctypes.c_int32(), ctypes.c_int32()
        self._check(self._lib.stepc_session_ranks(self._s, ctypes.byref(rank), ctypes.byref(world),
                                                  ctypes.byref(tp), self._err, _ERROR_LEN))
        # Under mpirun (each rank a Python process): this rank, and the rows of
        # the global batch it reads (data rank = rank / tp).
        self.rank, self.world_size, self.tensor_parallel = rank.value, world.value, tp.value
        self.data_rank = self.rank // self.tensor_parallel
        self.data_world = self.world_size // self.tensor_parallel
        self._check(self._lib.stepc_session_init_params(self._s, seed, self._err, _ERROR_LEN))
        self.aliases, self.ignore_index, self.buffers, self.input_names = {}, None, {}, {}
        if export_dir is not None:
            with open(os.path.join(export_dir, "export.json")) as f:
                info = json.load(f)
            self.aliases = info.get("aliases", {})
            self.input_names = info.get("input_names", {})
            self.ignore_index = info.get("ignore_index")
            buffers = os.path.join(export_dir, "buffers.safetensors")
            if os.path.exists(buffers):
                self.buffers = safetensors.load(buffers)
            init = os.path.join(export_dir, "init.safetensors")
            if os.path.exists(init):
                self.load_state_dict(safetensors.load(init), strict=False)

    def close(self):
        if getattr(self, "_s", None):
            self._lib.stepc_session_destroy(self._s)
            self._s = None

    def __del__(self):
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _check(self, status):
        if status != 0:
            raise StepcError(self._err.value.decode(errors="replace"))

    def _tensor_table(self):
        n = ctypes.c_int32()
        self._check(self._lib.stepc_session_num_tensors(self._s, ctypes.byref(n), self._err,
                                                        _ERROR_LEN))
        table = {}
        for i in range(n.value):
            name, role, rank = ctypes.c_char_p(), ctypes.c_int32(), ctypes.c_int32()
            shape = (ctypes.c_int64 * 8)()
            self._check(self._lib.stepc_session_tensor_info(
                self._s, i, ctypes.byref(name), ctypes.byref(role), ctypes.byref(rank), shape,
                self._err, _ERROR_LEN))
            table[name.value.decode()] = (role.value, tuple(shape[:rank.value]))
        return table

    def _input_table(self):
        n = ctypes.c_int32()
        self._check(self._lib.stepc_session_num_inputs(self._s, ctypes.byref(n), self._err,
                                                       _ERROR_LEN))
        table = {}
        for i in range(n.value):
            name = ctypes.c_char_p()
            self._check(self._lib.stepc_session_input_name(self._s, i, ctypes.byref(name),
                                                           self._err, _ERROR_LEN))
            dtype, rank = ctypes.c_int32(), ctypes.c_int32()
            shape = (ctypes.c_int64 * 8)()
            self._check(self._lib.stepc_session_input_info(
                self._s, name.value, ctypes.byref(dtype), ctypes.byref(rank), shape, self._err,
                _ERROR_LEN))
            table[name.value.decode()] = (dtype.value, tuple(shape[:rank.value]))
        return table

    # -- weights -------------------------------------------------------------
    @property
    def parameter_names(self):
        return [n for n, (role, _) in self._tensors.items() if role == 0]

    @property
    def frozen_parameter_names(self):
        """The parameters the step holds and reads but does not train: those
        exported with requires_grad=False and those the loss does not read
        (they have no optimizer state; every trained one has an exp_avg)."""
        return [n for n in self.parameter_names if "exp_avg." + n not in self._tensors]

    @property
    def tensor_names(self):
        """Every parameter, then every AdamW moment (exp_avg.<p>, exp_avg_sq.<p>)."""
        return list(self._tensors)

    def read(self, name):
        """A parameter or moment (exp_avg.<p>, exp_avg_sq.<p>) as float32."""
        if name not in self._tensors:
            raise KeyError(f"no parameter or moment '{name}' in this step")
        shape = self._tensors[name][1]
        out = np.empty(shape, dtype=np.float32)
        self._check(self._lib.stepc_session_read_param(
            self._s, name.encode(), out.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), out.size,
            self._err, _ERROR_LEN))
        return out

    def write(self, name, value):
        if name not in self._tensors:
            raise KeyError(f"no parameter or moment '{name}' in this step")
        a = _to_numpy(value)
        if a.dtype.kind not in "fiub":
            raise ValueError(f"'{name}': a {type(value).__name__} of {a.dtype}, not numbers")
        a = np.ascontiguousarray(a, dtype=np.float32)
        if tuple(a.shape) != self._tensors[name][1]:
            raise ValueError(f"'{name}': shape {tuple(a.shape)}, the step's is "
                             f"{self._tensors[name][1]}")
        self._check(self._lib.stepc_session_write_param(
            self._s, name.encode(), a.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), a.size,
            self._err, _ERROR_LEN))

    def load_state_dict(self, state_dict, strict=True):
        """Parameters from {name: tensor or array}; tied parameters under any of
        their names; the model's buffers (constants of the step) must equal
        the exported ones. strict: every parameter given, no unknown name."""
        given = set()
        for key, value in state_dict.items():
            if key in self.buffers:
                if not np.array_equal(_to_numpy(value), self.buffers[key]):
                    raise ValueError(f"buffer '{key}' differs from the exported one (buffers "
                                     f"are compiled into the step: export again)")
                continue
            name = self.aliases.get(key, key)
            if name not in self._tensors or self._tensors[name][0] != 0:
                if strict:
                    raise KeyError(f"unexpected key '{key}' (not a parameter of this step)")
                continue
            self.write(name, value)
            given.add(name)
        missing = [n for n in self.parameter_names if n not in given]
        if strict and missing:
            raise KeyError(f"missing keys: {missing}")

    def state_dict(self):
        """{state_dict name: tensor}: torch tensors when torch is importable,
        else NumPy arrays; a tied parameter under each of its names."""
        try:
            import torch
            wrap = torch.from_numpy
        except ImportError:
            def wrap(a):
                return a
        params = {n: self.read(n) for n in self.parameter_names}
        out = {}
        for alias, name in (self.aliases or {n: n for n in params}).items():
            if name in params:
                out[alias] = wrap(params[name].copy())
        for name, value in params.items():
            out.setdefault(name, wrap(value))
        for name, value in self.buffers.items():
            out[name] = wrap(value.copy())
        return out

    # -- steps ---------------------------------------------------------------
    def _set_inputs(self, inputs):
        # The forward's names (idx) for the step's (tokens).
        inputs = {self.input_names.get(k, k): v for k, v in inputs.items()}
        # Named as the forward names them (idx), where the export renamed them.
        forward = {step: name for name, step in self.input_names.items()}
        def spelled(names):
            return sorted(forward.get(n, n) for n in names)
        unknown = set(inputs) - set(self._inputs)
        if unknown:
            raise KeyError(f"unknown inputs {spelled(unknown)} (the step takes "
                           f"{spelled(self._inputs)})")
        missing = set(self._inputs) - set(inputs)
        if missing:
            raise KeyError(f"missing inputs {spelled(missing)}")
        for step_name, value in inputs.items():
            dtype, shape = self._inputs[step_name]
            name = forward.get(step_name, step_name)  # as the messages say it
            a = _to_numpy(value)
            # The global batch: this rank keeps its data rank's rows.
            if self.data_world > 1 and a.ndim == len(shape) and a.ndim > 0 and \
                    a.shape[0] == shape[0] * self.data_world and tuple(a.shape[1:]) == shape[1:]:
                a = a[self.data_rank * shape[0]:(self.data_rank + 1) * shape[0]]
            if tuple(a.shape) != shape:
                raise ValueError(f"input '{name}': shape {tuple(a.shape)}, the step's is {shape}"
                                 f" (or {(shape[0] * self.data_world,) + shape[1:]} for the "
                                 f"global batch)" if self.data_world > 1 else
                                 f"input '{name}': shape {tuple(a.shape)}, the step's is {shape}")
            if dtype == _I32:
                # Float ids would be truncated (1.7 -> 1) without a word.
                if a.dtype.kind not in "iub":
                    raise TypeError(f"input '{name}' is {a.dtype}; the step takes integer ids")
                if a.size and (a.min() < np.iinfo(np.int32).min or a.max() > np.iinfo(np.int32).max):
                    raise ValueError(f"input '{name}' has ids outside int32")
                a = np.ascontiguousarray(a, dtype=np.int32)
                self._check(self._lib.stepc_session_set_input(
                    self._s, step_name.encode(), a.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)),
                    a.size, self._err, _ERROR_LEN))
            else:
                if a.dtype.kind not in "fiub":
                    raise TypeError(f"input '{name}' is {a.dtype}; the step takes numbers")
                a = np.ascontiguousarray(a, dtype=np.float32)
                self._check(self._lib.stepc_session_set_input_f32(
                    self._s, step_name.encode(), a.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
                    a.size, self._err, _ERROR_LEN))

    def step(self, lr, **inputs):
        """One training step at learning rate `lr`: (loss, grad_norm). Inputs
        are this rank's rows or, under data parallelism, the global batch."""
        if isinstance(lr, bool) or not isinstance(lr, (int, float, np.number)):
            raise TypeError(f"lr must be a number, got {type(lr).__name__} {lr!r}")
        self._set_inputs(inputs)
        loss, norm = ctypes.c_float(), ctypes.c_float()
        self._check(self._lib.stepc_session_step(self._s, float(lr), ctypes.byref(loss),
                                                 ctypes.byref(norm), self._err, _ERROR_LEN))
        return loss.value, norm.value

    def eval(self, **inputs):
        """The loss (and the logits, where the model has them) without an update."""
        self._set_inputs(inputs)
        rank, shape = ctypes.c_int32(), (ctypes.c_int64 * 8)()
        self._check(self._lib.stepc_session_logits_shape(self._s, ctypes.byref(rank), shape,
                                                         self._err, _ERROR_LEN))
        loss = ctypes.c_float()
        if rank.value == 0:
            self._check(self._lib.stepc_session_eval(self._s, ctypes.byref(loss), self._err,
                                                     _ERROR_LEN))
            return loss.value, None
        logits = np.empty(tuple(shape[:rank.value]), dtype=np.float32)
        self._check(self._lib.stepc_session_eval_logits(
            self._s, ctypes.byref(loss), logits.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
            logits.size, self._err, _ERROR_LEN))
        return loss.value, logits

    def row_logits(self, input_name, row):
        """The logits of one row ([seq, vocab] for a language model) whose
        integer input `input_name` is `row` (the other inputs zero): what a
        sampler draws from, by step.so's one-row sampling step where it has
        one, else by the eval step (replacing the inputs set)."""
        rank, shape = ctypes.c_int32(), (ctypes.c_int64 * 8)()
        self._check(self._lib.stepc_session_logits_shape(self._s, ctypes.byref(rank), shape,
                                                         self._err, _ERROR_LEN))
        if rank.value < 2:
            raise StepcError("the module returns no logits with rows")
        input_name = self.input_names.get(input_name, input_name)
        a = _to_numpy(row)
        if a.dtype.kind not in "iub":
            raise TypeError(f"row of '{input_name}' is {a.dtype}; the step takes integer ids")
        a = np.ascontiguousarray(a, dtype=np.int32).reshape(-1)
        logits = np.empty(tuple(shape[1:rank.value]), dtype=np.float32)
        self._check(self._lib.stepc_session_row_logits(
            self._s, input_name.encode(), a.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)),
            a.size, logits.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), logits.size,
            self._err, _ERROR_LEN))
        return logits

    def metrics(self):
        """The last step's metrics (the loss function's `#step.result<metric,
        "name">` results, e.g. an MoE layer's expert loads), by name: a float
        for a scalar, else an array; reduced over the ranks as the loss."""
        n = ctypes.c_int32()
        self._check(self._lib.stepc_session_num_metrics(self._s, ctypes.byref(n), self._err,
                                                        _ERROR_LEN))
        table = []
        for i in range(n.value):
            name, rank, shape = ctypes.c_char_p(), ctypes.c_int32(), (ctypes.c_int64 * 8)()
            self._check(self._lib.stepc_session_metric_info(
                self._s, i, ctypes.byref(name), ctypes.byref(rank), shape, self._err, _ERROR_LEN))
            table.append((name.value.decode(), tuple(shape[:rank.value])))
        values = np.zeros(sum(int(np.prod(s)) for _, s in table), dtype=np.float32)
        self._check(self._lib.stepc_session_last_metrics(
            self._s, values.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), values.size,
            self._err, _ERROR_LEN))
        out, at = {}, 0
        for name, shape in table:
            size = int(np.prod(shape))
            part = values[at:at + size].reshape(shape)
            out[name] = float(part) if not shape else part
            at += size
        return out

    @property
    def steps_done(self):
        n = ctypes.c_int64()
        self._check(self._lib.stepc_session_steps_done(self._s, ctypes.byref(n), self._err,
                                                       _ERROR_LEN))
        return n.value

    def save_checkpoint(self, directory, trainer_state=None):
        """The same checkpoints as stepc-run (atomic, checksummed)."""
        text = json.dumps(trainer_state).encode() if trainer_state is not None else None
        self._check(self._lib.stepc_session_save_checkpoint(
            self._s, os.fsencode(directory), text, self._err, _ERROR_LEN))

    def load_checkpoint(self, directory):
        """Loads a checkpoint (of any sharding); returns (step, trainer_state)."""
        step = ctypes.c_int64()
        buf = ctypes.create_string_buffer(1 << 16)
        self._check(self._lib.stepc_session_load_checkpoint(
            self._s, os.fsencode(directory), ctypes.byref(step), buf, len(buf), self._err,
            _ERROR_LEN))
        return step.value, (json.loads(buf.value) if buf.value else None)

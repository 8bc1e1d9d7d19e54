"""The safetensors format, read and written without the safetensors package
(Debian has none): an 8-byte little-endian header length, a JSON header
{name: {dtype, shape, data_offsets}} and the raw little-endian tensors.
Tensors are NumPy arrays of any rank (0-d too); F32, F64, F16, I32, I64, BOOL
and BF16 (read as float32).
"""

import json
import struct

import numpy as np

_DTYPES = {"F32": np.float32, "F64": np.float64, "I32": np.int32, "I64": np.int64,
           "F16": np.float16, "BOOL": np.bool_}
_NAMES = {np.dtype(v): k for k, v in _DTYPES.items()}


def save(tensors, path, metadata=None):
    """Writes {name: array} to `path` (names sorted, as the format's writers do)."""
    header, offset, blobs = {}, 0, []
    for name in sorted(tensors):
        a = np.asarray(tensors[name])
        a = np.ascontiguousarray(a).reshape(a.shape)  # a 0-d tensor stays 0-d
        if a.dtype not in _NAMES:
            raise ValueError(f"safetensors: tensor '{name}' has unsupported dtype {a.dtype}")
        data = a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": _NAMES[a.dtype], "shape": list(a.shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # data 8-byte aligned
    import errno
    import os
    import tempfile
    # Whole or not at all, beside the target (never replacing a device node:
    # a special file is written in place).
    if os.path.isdir(path):
        raise IsADirectoryError(f"safetensors: '{path}' is a directory")
    if os.path.exists(path) and not os.path.isfile(path):
        # Opened without blocking: a FIFO no process reads is an error, not
        # a wait forever.
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as e:
            if e.errno == errno.ENXIO:
                raise OSError(errno.ENXIO, f"safetensors: no process reads '{path}' "
                                           "(a FIFO or socket: writing would block)") from None
            raise
        os.set_blocking(fd, True)
        with os.fdopen(fd, "wb") as f:
            f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
        return
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(struct.pack("<Q", len(text)))
            f.write(text)
            for blob in blobs:
                f.write(blob)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def load(path):
    """{name: array} from `path`; a malformed file is a ValueError naming it."""
    import os
    if not os.path.isfile(path):  # a FIFO would block, a device never end
        raise ValueError(f"safetensors: '{path}' is missing or not a regular file")
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError(f"safetensors: '{path}' is too short")
    (n,) = struct.unpack("<Q", raw[:8])
    if n > len(raw) - 8:
        raise ValueError(f"safetensors: '{path}' header of {n} bytes exceeds the file")
    try:
        header = json.loads(raw[8:8 + n])
    except ValueError as e:
        raise ValueError(f"safetensors: '{path}' has a malformed header: {e}") from None
    if not isinstance(header, dict):
        raise ValueError(f"safetensors: '{path}' header is a JSON {type(header).__name__}, "
                         f"not an object")
    meta = header.get("__metadata__", {})
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise ValueError(f"safetensors: '{path}' __metadata__ is not an object of strings")
    data = memoryview(raw)[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        out[name] = _tensor(path, name, info, data)
    return out


def _is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


def _tensor(path, name, info, data):
    """One tensor of a loaded file, every header field checked first."""
    def bad(why):
        return ValueError(f"safetensors: '{path}' tensor '{name}' {why}")
    if not isinstance(info, dict):
        raise bad(f"has a header entry that is not an object ({info!r})")
    dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
    if dtype != "BF16" and dtype not in _DTYPES:
        raise bad(f"has dtype {dtype!r}")
    if not isinstance(shape, list) or not all(_is_int(d) and d >= 0 for d in shape):
        raise bad(f"has shape {shape!r}, expected a list of sizes >= 0")
    if not isinstance(offsets, list) or len(offsets) != 2 or not all(map(_is_int, offsets)):
        raise bad(f"has data_offsets {offsets!r}, expected [begin, end]")
    begin, end = offsets
    if not 0 <= begin <= end <= len(data):
        raise bad(f"has data_offsets [{begin}, {end}] outside the file's {len(data)} data bytes")
    size = 2 if dtype == "BF16" else np.dtype(_DTYPES[dtype]).itemsize
    count = 1
    for d in shape:
        count *= d
    if count * size != end - begin:
        raise bad(f"has inconsistent offsets: shape {shape} of {dtype} is {count * size} "
                  f"bytes, data_offsets span {end - begin}")
    if dtype == "BF16":
        words = np.frombuffer(data[begin:end], dtype="<u2").astype(np.uint32) << 16
        a = words.view(np.float32)
    else:
        a = np.frombuffer(data[begin:end], dtype=np.dtype(_DTYPES[dtype]).newbyteorder("<"))
    return a.reshape(shape).copy()

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
    data = memoryview(raw)[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        shape = info["shape"]
        if info["dtype"] == "BF16":
            words = np.frombuffer(data[begin:end], dtype="<u2").astype(np.uint32) << 16
            a = words.view(np.float32)
        elif info["dtype"] in _DTYPES:
            a = np.frombuffer(data[begin:end], dtype=np.dtype(_DTYPES[info["dtype"]]).newbyteorder("<"))
        else:
            raise ValueError(f"safetensors: '{path}' tensor '{name}' has dtype {info['dtype']}")
        if a.size != int(np.prod(shape)) or not 0 <= begin <= end <= len(data):
            raise ValueError(f"safetensors: '{path}' tensor '{name}' has inconsistent offsets")
        out[name] = a.reshape(shape).copy()
    return out

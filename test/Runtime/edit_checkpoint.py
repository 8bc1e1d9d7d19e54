#!/usr/bin/env python3
"""Edits a stepc checkpoint's metadata the way a hostile (or careless) program
would, for the tests: sets fields and signs the result again, so the runtime's
checks behind the checksum are reached.

    edit_checkpoint.py CHECKPOINT_JSON path.to.field=JSON ... [--unsigned]
    edit_checkpoint.py --poison SHARD_FILE TENSOR VALUE

`trainer.schedule.lr=1e300` sets a field (JSON value; a path step that is a
number indexes a list); `step=` (empty) deletes it. --unsigned leaves the old
checksum as it was (the edit must then be caught by it). --poison writes
VALUE (nan, inf, -1, ...) as TENSOR's first float in a shard file and fixes
the piece's and the index's CRC-32, as a diverged run's save would look.
"""

import json
import struct
import sys
import zlib

HEADER = 8 + 4 + 4 + 8  # magic, version, index CRC-32, index bytes


def checksum(meta):
    """CRC-32 of the compact, key-sorted JSON without "checksum" (as written)."""
    body = {k: v for k, v in meta.items() if k != "checksum"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return zlib.crc32(text.encode())


def poison(shard, tensor, value):
    with open(shard, "rb") as f:
        blob = bytearray(f.read())
    (index_bytes,) = struct.unpack_from("<Q", blob, 16)
    lines = blob[HEADER:HEADER + index_bytes].decode().splitlines()
    for k, line in enumerate(lines):
        name, begin, end, numel, offset, _ = line.split("\t")
        if name != tensor:
            continue
        start = HEADER + index_bytes + int(offset)
        size = (int(end) - int(begin)) * int(numel) * 4
        struct.pack_into("<f", blob, start, float(value))
        crc = zlib.crc32(bytes(blob[start:start + size]))
        lines[k] = "\t".join([name, begin, end, numel, offset, str(crc)])
        break
    else:
        sys.exit(f"{shard} holds no tensor '{tensor}'")
    index = ("\n".join(lines) + "\n").encode()
    blob = blob[:12] + struct.pack("<I", zlib.crc32(index)) + struct.pack("<Q", len(index)) + \
        index + blob[HEADER + index_bytes:]
    with open(shard, "wb") as f:
        f.write(blob)


def main():
    args = sys.argv[1:]
    if args and args[0] == "--poison":
        poison(*args[1:4])
        return
    unsigned = "--unsigned" in args
    args = [a for a in args if a != "--unsigned"]
    path, edits = args[0], args[1:]
    with open(path) as f:
        meta = json.load(f)
    for edit in edits:
        keys, value = edit.split("=", 1)
        *parents, last = keys.split(".")
        node = meta
        for k in parents:
            node = node[int(k)] if isinstance(node, list) else node[k]
        if isinstance(node, list):
            last = int(last)
        if value == "":
            del node[last]
        else:
            node[last] = json.loads(value)
    if not unsigned and "checksum" in meta:
        meta["checksum"] = checksum(meta)
    with open(path, "w") as f:
        json.dump(meta, f, indent=1)


if __name__ == "__main__":
    main()

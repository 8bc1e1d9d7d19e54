#!/usr/bin/env python3
"""The executed FLOPs by block of sharded steps are one rank's over the ranks.

    check_blocks_sharded.py ONE.json SHARDED.json:RANKS ...
"""
import json
import sys

one = json.load(open(sys.argv[1]))["executed_flops_by_block"]
for arg in sys.argv[2:]:
    path, ranks = arg.rsplit(":", 1)
    got = json.load(open(path))["executed_flops_by_block"]
    want = {k: v // int(ranks) for k, v in one.items()}
    if got != want:
        sys.exit(f"{path}: {got}, not one rank's / {ranks}: {want}")
print(f"blocks agree: {len(sys.argv) - 2} shardings, {len(one)} keys")

#!/usr/bin/env python3
"""Prints keys of a stepc --report JSON, one per line, for FileCheck.

    print_report.py REPORT.json KEY...

Each line is `KEY VALUE`, objects as sorted single-line JSON.
"""
import json
import sys

report = json.load(open(sys.argv[1]))
for key in sys.argv[2:]:
    if key not in report:
        sys.exit(f"{sys.argv[1]} has no {key}")
    value = report[key]
    print(key, json.dumps(value, sort_keys=True) if isinstance(value, (dict, list)) else value)

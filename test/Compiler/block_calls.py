"""Prints, for each step of an outlined module (step-outline-blocks), the
block functions it calls in order (their step.block_function numbers), then
how many block functions the module defines."""

import re
import sys

text = open(sys.argv[1]).read()
number = {name: int(n) for name, n in re.findall(
    r"func\.func private @(\w+)\(.*step\.block_function = (\d+) : i64", text)}
step = None
for line in text.splitlines():
    if m := re.match(r"\s*func\.func @(\w+)\(", line):
        if step:
            print(step, "calls", " ".join(calls))
        step, calls = m[1], []
    elif m := re.match(r"\s*func\.func private @", line):
        if step:
            print(step, "calls", " ".join(calls))
        step = None
    elif step and (m := re.search(r"= call @(\w+)\(", line)):
        calls.append(str(number[m[1]]))
if step:
    print(step, "calls", " ".join(calls))
print("functions", len(number))

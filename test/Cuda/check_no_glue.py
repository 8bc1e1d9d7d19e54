"""Checks a CUDA step's source (stepc --emit=source) for kernels that only
move activations between the real ones: a standalone convert, slice or pad
whose element count is a multiple of the step's token count (an activation;
parameters are rounded for their GEMMs by converts of their own sizes).

    check_no_glue.py STEP.cu TOKENS [REQUIRED_CALL ...]

Exits 1 naming each such kernel, or a required library call that is absent.
"""
import re
import sys


def main():
    path, tokens = sys.argv[1], int(sys.argv[2])
    required = sys.argv[3:]
    lines = open(path).read().splitlines()
    bad = []
    for i, line in enumerate(lines):
        m = re.match(r"\s*// step\.(convert|slice|pad)\b", line)
        if not m or i + 1 >= len(lines):
            continue
        if "STEPC_LAUNCH(" not in lines[i + 1] and "STEPC_TRY(" not in lines[i + 1]:
            continue  # a generated kernel's definition, not a launch
        launch = re.search(r", (\d+)\);$", lines[i + 1])
        if not launch:  # a library call (slice, pad): always glue
            bad.append(f"line {i + 1}: step.{m.group(1)}: {lines[i + 1].strip()[:100]}")
            continue
        n = int(launch.group(1))
        if n % tokens == 0:
            bad.append(f"line {i + 1}: step.{m.group(1)} of {n} elements (an activation)")
    text = "\n".join(lines)
    for call in required:
        if call + "(ctx" not in text:
            bad.append(f"missing call {call}")
    for b in bad:
        print(b)
    print(f"{len(bad)} problem(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

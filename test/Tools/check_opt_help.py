"""stepc-opt --help leads with stepc's passes: every step-* pass the generic
list registers is named in the overview, before MLIR's own options."""
import re
import sys

text = sys.stdin.read()
overview, _, rest = text.partition("USAGE:")
listed = re.findall(r"^  --(step-[a-z0-9-]+) ", overview, re.M)
registered = re.findall(r"^      --(step-[a-z0-9-]+) ", rest, re.M)
missing = sorted(set(registered) - set(listed))
if not registered or missing:
    sys.exit(f"stepc-opt --help: overview lacks {missing} (registered: {registered})")
print(f"overview names all {len(registered)} stepc passes, in pipeline order: {' '.join(listed)}")

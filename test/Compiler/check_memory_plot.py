"""The memory plot is well-formed SVG whose stated figures are the report's:
arena, planned peak, and live peak (arguments + the plan's live peak); the
arena curve has a point per op; a budget, when given, is drawn and labelled;
dashed lines mark where the backward and the optimizer begin, in order."""
import json
import re
import sys
import xml.etree.ElementTree as ET

svg, report = sys.argv[1], json.load(open(sys.argv[2]))
ns = {"s": "http://www.w3.org/2000/svg"}
root = ET.parse(svg).getroot()
texts = {t.get("id"): t.text for t in root.iter("{http://www.w3.org/2000/svg}text")}
m = re.match(r"arguments (\d+) B, arena (\d+) B, planned peak (\d+) B, live peak (\d+) B at op (\d+)",
             texts["figures"])
args, arena, planned, live, at = map(int, m.groups())
assert arena == report["arena_bytes"], (arena, report["arena_bytes"])
assert planned == report["planned_peak_bytes"], (planned, report["planned_peak_bytes"])
assert live == args + report["live_bytes_peak"], (live, args, report["live_bytes_peak"])
assert planned >= live, (planned, live)
ops = int(re.search(r"across the step's (\d+) ops", "".join(t.text or "" for t in root.iter(
    "{http://www.w3.org/2000/svg}text"))).group(1))
points = root.find("s:polygon", ns).get("points").split()
assert len(points) == ops + 2, (len(points), ops)
labels = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
budget = [l for l in labels if l and l.startswith("budget ")]
buffers = [t for t in root.iter("{http://www.w3.org/2000/svg}text") if t.get("class") == "buffer"]
# The backward starts after the forward's first op, the optimizer after it.
starts = {k: int(re.search(r"from op (\d+)", texts[k]).group(1)) for k in ("backward", "optimizer")}
assert 0 < starts["backward"] < starts["optimizer"] < ops, (starts, ops)
print(f"ok: {ops} ops, planned peak {planned}, live peak {live} at op {at}, "
      f"{len(buffers)} buffers labelled, budget line: {budget[0] if budget else 'none'}, "
      f"backward from op {starts['backward']}, optimizer from op {starts['optimizer']}")

#!/usr/bin/env python3
"""Draws a `stepc-run --trace` timeline as a picture (SVG), without a browser.

    python3 scripts/trace_picture.py TRACE.json [-o PICTURE.svg] [--step N]

TRACE.json is one rank's trace or a merged one (scripts/merge_traces.py).
One band per rank, as Perfetto shows it: a lane per thread track (host
phases, kernels, blocks), the collectives from issue to done (overlapping
ones stacked in rows), and the plan's live arena bytes as a line. The time
axis is in milliseconds from the drawn step's start, with ticks and a grid;
a span wide enough carries its name. `--step N` draws step N (default: the
first traced step). Convert to PNG with `rsvg-convert PICTURE.svg -o
PICTURE.png`.
"""
import argparse
import json
import math
import sys
from xml.sax.saxutils import escape

WIDTH, LEFT, RIGHT = 1600, 200, 20
LANE, ROW, GAP, COUNTER = 22, 9, 14, 60
PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1",
           "#ff9da7", "#9c755f", "#bab0ac"]


def colour(name):
    """The same colour for the same kind of span (kernels by their op)."""
    if name.startswith(("stepk.gemm", "step.matmul", "gemm")):
        return "#4e79a7"
    if "attention" in name:
        return "#b07aa1"
    if name.startswith(("mesh.", "all_", "reduce_scatter")):
        return "#e15759"
    return PALETTE[sum(map(ord, name)) % len(PALETTE)]


def legend():
    """Which colour is which kind of kernel (others: a colour per op name)."""
    items = [("GEMM", "#4e79a7"), ("attention", "#b07aa1"), ("collective", "#e15759"),
             ("other ops: one colour per op", "#bab0ac")]
    out, lx = [], WIDTH - RIGHT - 560
    for name, fill in items:
        out.append(f'<rect x="{lx}" y="32" width="12" height="10" fill="{fill}"/>')
        out.append(f'<text x="{lx + 16}" y="41" font-size="11">{escape(name)}</text>')
        lx += 16 + 7 * len(name) + 18
    return out


def nice_step(span, ticks=10):
    """A round tick spacing giving about `ticks` ticks over `span`."""
    raw = span / ticks
    base = 10 ** math.floor(math.log10(raw))
    return next(m * base for m in (1, 2, 5, 10) if m * base >= raw)


def pack(spans):
    """Rows for overlapping spans: each goes to the first row free at its start."""
    ends, rows = [], []
    for start, end, _ in spans:
        row = next((r for r, e in enumerate(ends) if e <= start), len(ends))
        if row == len(ends):
            ends.append(end)
        ends[row] = end
        rows.append(row)
    return rows, max(1, len(ends))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("trace")
    p.add_argument("-o", "--output")
    p.add_argument("--step", type=int)
    a = p.parse_args()
    try:
        with open(a.trace) as f:
            events = json.load(f)["traceEvents"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        sys.exit(f"trace_picture: cannot read '{a.trace}': {e}")

    steps = [e for e in events if e.get("ph") == "X" and e.get("name") == "step"]
    if not steps:
        sys.exit("trace_picture: the trace has no step (stepc-run --trace, --trace-steps)")
    number = a.step if a.step is not None else min(e["args"]["step"] for e in steps)
    drawn = [e for e in steps if e["args"].get("step") == number]
    if not drawn:
        sys.exit(f"trace_picture: step {number} is not in the trace")
    t0 = min(e["ts"] for e in drawn)
    t1 = max(e["ts"] + e["dur"] for e in drawn)
    in_step = lambda e: e.get("args", {}).get("step", number) == number

    names = {}  # (pid, tid) -> thread name; pid -> process name
    for e in events:
        if e.get("ph") == "M" and e["name"] == "thread_name":
            names[(e["pid"], e["tid"])] = e["args"]["name"]
        if e.get("ph") == "M" and e["name"] == "process_name":
            names[e["pid"]] = e["args"]["name"]
    lanes = {}  # (pid, tid) -> [(start, end, name)]
    for e in events:
        if e.get("ph") == "X" and in_step(e):  # (drawn clipped to the step)
            lanes.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"],
                                                                e["name"]))
    begun = {}
    for e in sorted((e for e in events if e.get("ph") in ("b", "e")), key=lambda e: e["ts"]):
        key = (e["pid"], e.get("cat"), e.get("id"))
        if e["ph"] == "b" and in_step(e):
            begun[key] = e
        elif e["ph"] == "e" and key in begun:
            b = begun.pop(key)
            lanes.setdefault((b["pid"], b["tid"]), []).append((b["ts"], e["ts"], b["name"]))
    counters = {}
    for e in events:
        if e.get("ph") == "C" and t0 <= e["ts"] <= t1:
            counters.setdefault(e["pid"], []).append((e["ts"], next(iter(e["args"].values()))))

    scale = (WIDTH - LEFT - RIGHT) / max(t1 - t0, 1e-9)
    x = lambda ts: LEFT + (min(max(ts, t0), t1) - t0) * scale
    body, y = [], 50
    for pid in sorted({k[0] for k in lanes} | set(counters)):
        body.append(f'<text x="8" y="{y + 12}" font-weight="bold">'
                    f'{escape(names.get(pid, f"rank {pid}"))}</text>')
        y += 18
        for key in sorted(k for k in lanes if k[0] == pid):
            spans = sorted(lanes[key])
            rows, count = pack(spans)
            height = LANE if count == 1 else count * ROW + 4
            body.append(f'<text x="8" y="{y + 14}">{escape(names.get(key, f"thread {key[1]}"))}'
                        f'</text>')
            body.append(f'<rect x="{LEFT}" y="{y}" width="{WIDTH - LEFT - RIGHT}" '
                        f'height="{height}" fill="#f4f4f4"/>')
            for (start, end, name), row in zip(spans, rows):
                left, w = x(start), max(x(end) - x(start), 0.5)
                top, h = (y + 2, LANE - 4) if count == 1 else (y + 2 + row * ROW, ROW - 1)
                body.append(f'<rect x="{left:.2f}" y="{top}" width="{w:.2f}" height="{h}" '
                            f'fill="{colour(name)}"><title>{escape(name)} '
                            f'{(end - start) / 1e3:.3f} ms</title></rect>')
                if count == 1 and w > 7 * len(name):
                    body.append(f'<text x="{left + 3:.2f}" y="{y + 15}" fill="white" '
                                f'font-size="11">{escape(name)}</text>')
            y += height + 4
        if pid in counters:
            points = sorted(counters[pid])
            top = max(v for _, v in points) or 1
            body.append(f'<text x="8" y="{y + 14}">live arena (plan)</text>')
            body.append(f'<text x="8" y="{y + 28}" font-size="11">0–{top / 1e6:.1f} MB</text>')
            body.append(f'<rect x="{LEFT}" y="{y}" width="{WIDTH - LEFT - RIGHT}" '
                        f'height="{COUNTER}" fill="#f4f4f4"/>')
            path, last = [], None
            for ts, v in points:
                py = y + COUNTER - 2 - (COUNTER - 4) * v / top
                if last is not None:
                    path.append(f"L{x(ts):.2f},{last:.2f}")
                path.append(f"{'M' if not path else 'L'}{x(ts):.2f},{py:.2f}")
                last = py
            path.append(f"L{x(t1):.2f},{last:.2f}")
            body.append(f'<path d="{" ".join(path)}" fill="none" stroke="#59a14f" '
                        f'stroke-width="1.5"/>')
            y += COUNTER + 4
        y += GAP

    span_ms = (t1 - t0) / 1e3
    step_ms = nice_step(span_ms)
    axis = [f'<line x1="{LEFT}" y1="{y}" x2="{WIDTH - RIGHT}" y2="{y}" stroke="black"/>']
    tick = 0.0
    while tick <= span_ms + 1e-9:
        tx = LEFT + tick * 1e3 * scale
        axis.append(f'<line x1="{tx:.2f}" y1="44" x2="{tx:.2f}" y2="{y}" stroke="#cccccc" '
                    f'stroke-width="0.5"/>')
        axis.append(f'<line x1="{tx:.2f}" y1="{y}" x2="{tx:.2f}" y2="{y + 5}" stroke="black"/>')
        axis.append(f'<text x="{tx:.2f}" y="{y + 18}" text-anchor="middle" font-size="11">'
                    f'{tick:g}</text>')
        tick += step_ms
    axis.append(f'<text x="{(LEFT + WIDTH - RIGHT) / 2}" y="{y + 36}" text-anchor="middle">'
                f'time from the step\'s start (ms)</text>')
    height = y + 48
    title = f"{escape(a.trace.split('/')[-1])}: step {number}, {span_ms:.1f} ms"
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{WIDTH}" height="{height}" fill="white"/>',
           f'<text x="{WIDTH / 2}" y="24" text-anchor="middle" font-size="15">{title}</text>',
           *legend(),
           *axis, *body, "</svg>"]
    out = a.output or a.trace.rsplit(".json", 1)[0] + ".svg"
    with open(out, "w") as f:
        f.write("\n".join(svg) + "\n")
    print(f"trace_picture: step {number} ({span_ms:.1f} ms), "
          f"{sum(len(v) for v in lanes.values())} spans in {len(lanes)} lanes -> {out}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        # An event without the fields its phase needs (not a stepc-run trace).
        sys.exit(f"trace_picture: not a stepc-run trace (an event lacks {e!r})")

#!/usr/bin/python3
"""Chapter 07 figure: the FP8 GEMM accumulation error vs K, with and without promotion every 128.

Runs `build/bin/ladder reproduce 07-precision` (tools/ladder/07-precision/reproduce.cpp computes the
curve with the stage's emulated accumulator), reads its Markdown table and draws the three curves on
log-log axes as an SVG (standard library only). Usage: ch07_precision.py [OUT_DIR] (make figures)."""
import math
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def curve():
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([os.path.join(ROOT, "build", "bin", "ladder"), "reproduce", "07-precision", "--out", tmp],
                       check=True, stdout=subprocess.DEVNULL)
        md = open(os.path.join(tmp, "07-precision.md"), encoding="utf-8").read()
    rows = []
    for line in md.splitlines():
        m = re.match(r"^\| (\d+) \| ([\d.]+)% \| ([\d.]+)% \| ([\d.]+)% \|", line)
        if m:
            rows.append([int(m.group(1))] + [float(m.group(i)) for i in (2, 3, 4)])
    return rows


def svg(rows):
    w, h, l, r, t, b = 640, 400, 70, 200, 30, 50
    xs = [math.log2(k) for k, *_ in rows]
    lo, hi = -2.0, 2.0  # log10 of percent: 0.01 % .. 100 %
    def px(x): return l + (x - xs[0]) / (xs[-1] - xs[0]) * (w - l - r)
    def py(v): return t + (hi - max(lo, min(hi, math.log10(v)))) / (hi - lo) * (h - t - b)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>']
    for e in range(int(lo), int(hi) + 1):
        y = py(10.0 ** e)
        out.append(f'<line x1="{l}" y1="{y:.1f}" x2="{w - r}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{l - 6}" y="{y + 4:.1f}" text-anchor="end">{10.0 ** e:g}%</text>')
    for x, (k, *_) in zip(xs, rows):
        out.append(f'<text x="{px(x):.1f}" y="{h - b + 18}" text-anchor="middle">{k}</text>')
    out.append(f'<text x="{(l + w - r) / 2}" y="{h - 10}" text-anchor="middle">K (inner dimension)</text>')
    out.append(f'<text x="14" y="{(t + h - b) / 2}" transform="rotate(-90 14 {(t + h - b) / 2})" '
               'text-anchor="middle">max relative error</text>')
    series = [(1, "#d62728", "14-bit, RNE, no promotion"), (2, "#ff7f0e", "14-bit, truncating, no promotion"),
              (3, "#1f77b4", "14-bit, promoted every 128")]
    for col, color, name in series:
        pts = " ".join(f"{px(x):.1f},{py(row[col]):.1f}" for x, row in zip(xs, rows))
        out.append(f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="2"/>')
        for x, row in zip(xs, rows):
            out.append(f'<circle cx="{px(x):.1f}" cy="{py(row[col]):.1f}" r="3" fill="{color}"/>')
    # the report's point: nearly 2 % at K = 4096 without promotion
    x4096 = px(12.0)
    out.append(f'<circle cx="{x4096:.1f}" cy="{py(2.0):.1f}" r="6" fill="none" stroke="black" stroke-width="1.5"/>')
    for i, (col, color, name) in enumerate(series + [(0, "black", "DeepSeek-V3 report: ~2 % at K = 4096")]):
        y = t + 20 + 20 * i
        out.append(f'<line x1="{w - r + 10}" y1="{y}" x2="{w - r + 30}" y2="{y}" stroke="{color}" stroke-width="2"/>')
        out.append(f'<text x="{w - r + 34}" y="{y + 4}" font-size="10">{name}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main(out_dir):
    rows = curve()
    assert len(rows) >= 3, "no curve in the reproduce table"
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "accumulation_vs_k.svg")
    with open(path, "w", encoding="utf-8") as f:
        f.write(svg(rows))
    print(path)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "chapters", "07-precision", "figures"))

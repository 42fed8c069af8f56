#!/usr/bin/python3
"""Chapter 03 figure (second half): prefill vs decode, a chunk of q_len new tokens on a cached prefix P,
computed decompressed (the prefill rung, FlashMLA's MHA mode) and absorbed (the decode rungs' form, MQA mode).

Left: time per new token vs q_len, both paths, as measured on this CPU. Right: the ratios absorbed /
decompressed of the measured time and of Cost's FLOPs (ref/include/ladder/03-mla/cost.hpp, chunk_cost),
with the counted crossover (the formula's q_len*, where the FLOPs are equal) and the measured one (where
the time ratio crosses 1). Every number comes from the CSV `ladder reproduce 03-mla` writes
(03-mla-chunk-timing.csv: P, q_len, path, seconds, flops, counted_crossover); nothing is typed in here.

Usage: ch03_prefill.py [OUT_DIR] [--csv CSV] [--png PNG]. Without --csv the script runs
`ladder reproduce 03-mla` (LADDER=path/to/ladder or build/bin/ladder; about a minute) in a temporary
folder and draws from the CSV it wrote. `ladder reproduce 03-mla` itself calls this script with --csv and
--png to put the figure beside its report. Default OUT_DIR: chapters/03-mla/figures (make figures)."""
import argparse
import csv
import math
import os
import subprocess
import sys
import tempfile

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CSV_NAME = "03-mla-chunk-timing.csv"


def read(csv_path):
    with open(csv_path) as f:
        rows = list(csv.DictReader(f))
    if not rows:
        sys.exit(f"ch03_prefill.py: {csv_path} has no rows")
    pts = {}
    for r in rows:
        pts.setdefault(int(r["q_len"]), {})[r["path"]] = (float(r["seconds"]), float(r["flops"]))
    n = sorted(q for q, p in pts.items() if {"absorbed", "decompressed"} <= set(p))
    return int(rows[0]["P"]), float(rows[0]["counted_crossover"]), n, pts


def crossing(n, ratio):
    """q_len where ratio (absorbed / decompressed) reaches 1, log-interpolated; None if it never does."""
    for i in range(1, len(n)):
        if ratio[i - 1] < 1 <= ratio[i]:
            x0, x1 = math.log(n[i - 1]), math.log(n[i])
            f = (1 - ratio[i - 1]) / (ratio[i] - ratio[i - 1])
            return math.exp(x0 + f * (x1 - x0))
    return None


def draw(csv_path, png_path):
    P, counted, n, pts = read(csv_path)
    t_abs = [pts[q]["absorbed"][0] for q in n]
    t_dec = [pts[q]["decompressed"][0] for q in n]
    time_ratio = [a / d for a, d in zip(t_abs, t_dec)]
    flop_ratio = [pts[q]["absorbed"][1] / pts[q]["decompressed"][1] for q in n]
    measured = crossing(n, time_ratio)
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.3))
    left.plot(n, [1e3 * t / q for t, q in zip(t_abs, n)], "o-", label="absorbed (MQA mode: d_qk 576, d_v 512)")
    left.plot(n, [1e3 * t / q for t, q in zip(t_dec, n)], "s-", label="decompressed (MHA mode: d_qk 192, d_v 128)")
    left.set(xscale="log", yscale="log", xlabel="q_len (new tokens in the chunk)", ylabel="ms per new token",
             title=f"a chunk on a prefix of P = {P}, this CPU (fp32)")
    left.legend(fontsize=8)
    right.plot(n, time_ratio, "o-", color="C2", label="time absorbed / decompressed (measured)")
    right.plot(n, flop_ratio, "^--", color="C3", label="FLOPs absorbed / decompressed (Cost)")
    right.axhline(1, color="grey", lw=0.8)
    right.axvline(counted, color="C3", lw=0.8, ls=":")
    right.text(counted, 0.98, f" counted q_len* = {counted:.0f}", color="C3", fontsize=8, va="top",
               transform=right.get_xaxis_transform())
    if measured is not None:
        right.axvline(measured, color="C2", lw=0.8, ls=":")
        right.text(measured, 0.90, f" measured ~ {measured:.0f}", color="C2", fontsize=8, va="top",
                   transform=right.get_xaxis_transform())
    else:
        right.text(0.02, 0.02, f"measured: time ratio < 1 up to q_len {n[-1]}", color="C2", fontsize=8,
                   transform=right.transAxes)
    right.set(xscale="log", yscale="log", xlabel="q_len", ylabel="absorbed / decompressed",
              title="above 1: decompressing is the cheaper path")
    right.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(png_path, dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir", nargs="?", default=os.path.join(ROOT, "chapters", "03-mla", "figures"))
    ap.add_argument("--csv", help=f"the {CSV_NAME} of a `ladder reproduce 03-mla` run (default: run it now)")
    ap.add_argument("--png", help="where to write the figure (default OUT_DIR/prefill_crossover.png)")
    a = ap.parse_args()
    png = a.png or os.path.join(a.out_dir, "prefill_crossover.png")
    if a.csv:
        draw(a.csv, png)
        return
    ladder = os.environ.get("LADDER", os.path.join(ROOT, "build", "bin", "ladder"))
    if not os.path.exists(ladder):
        sys.exit(f"ch03_prefill.py: {ladder} not found: build the ladder CLI first (make build) or set LADDER")
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([ladder, "reproduce", "03-mla", "--out", tmp], check=True, stdout=subprocess.DEVNULL)
        draw(os.path.join(tmp, CSV_NAME), png)


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Stage 06 plots: SLO attainment vs rate per GPU (one line per placement) and TTFT / TPOT CDFs.

    /usr/bin/python3 scripts/plot_06_disagg.py DIR [TITLE]

Reads DIR/attainment.csv and DIR/latency.csv (written by `ladder simulate --plot DIR` and
`ladder reproduce 06-disagg`) and writes DIR/attainment.png and DIR/latency_cdf.png.
"""
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return list(csv.DictReader(f))


def main():
    d = sys.argv[1]
    title = sys.argv[2] if len(sys.argv) > 2 else ""
    rows = read(os.path.join(d, "attainment.csv"))
    fig, ax = plt.subplots(figsize=(6, 4))
    for name in dict.fromkeys(r["placement"] for r in rows):
        pts = [(float(r["per_gpu_rps"]), float(r["attainment"])) for r in rows if r["placement"] == name]
        ax.plot([p[0] for p in pts], [100 * p[1] for p in pts], marker=".", label=name)
    ax.axhline(90, color="grey", linestyle="--", linewidth=1, label="90% target")
    ax.set_xlabel("rate per GPU (requests/s/GPU)")
    ax.set_ylabel("SLO attainment (%)")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(d, "attainment.png"), dpi=120)

    lat = read(os.path.join(d, "latency.csv"))
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    for name in dict.fromkeys(r["placement"] for r in lat):
        for ax, key in zip(axes, ["ttft_ms", "tpot_ms"]):
            v = sorted(float(r[key]) for r in lat if r["placement"] == name)
            ax.plot(v, [(i + 1) / len(v) for i in range(len(v))], label=name)
    for ax, key in zip(axes, ["TTFT (ms)", "TPOT (ms)"]):
        ax.set_xlabel(key)
        ax.set_ylabel("fraction of requests")
        if lat:
            ax.legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(os.path.join(d, "latency_cdf.png"), dpi=120)


if __name__ == "__main__":
    main()

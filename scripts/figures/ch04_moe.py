#!/usr/bin/python3
"""Chapter 04 figure: rows per expert after the sort (group_sizes), balanced vs Zipf, and what dropping keeps.

Reads the committed golden cases of data/golden/04-moe: e16_T128 (no bias: a balanced load) and
e16_zipf (a Zipf-skewed bias) for the left panel -- their group_sizes, i.e. the ragged dot's groups --
and e16_dropping_zipf for the right panel: per expert, the assignments kept (kept.npy, the first C in
sorted order) and dropped, with the capacity C = round(capacity_factor T k / E).
Usage: ch04_moe.py OUT_DIR (make figures)."""
import json
import os
import sys

import numpy as np
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOLDEN = os.path.join(ROOT, "data", "golden", "04-moe")


def load(case, name):
    return np.load(os.path.join(GOLDEN, case, name + ".npy"))


def main(out_dir):
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), layout="constrained")
    E = len(load("e16_T128", "group_sizes"))
    x = np.arange(E)
    for off, case, label in [(-0.2, "e16_T128", "balanced (no bias)"), (0.2, "e16_zipf", "Zipf-skewed bias")]:
        gs = load(case, "group_sizes")
        axes[0].bar(x + off, gs, width=0.4, label=f"{label}: max/mean {gs.max() / gs.mean():.2f}")
    cj = json.load(open(os.path.join(GOLDEN, "e16_T128", "case.json")))
    T, k = cj["shapes"]["topk_idx"]
    axes[0].axhline(T * k / E, color="grey", lw=0.8, label=f"mean T k / E = {T * k // E}")
    axes[0].set(title=f"group_sizes after the sort\n(T = {T}, top-{k} of {E})", xlabel="expert",
                ylabel="rows (assignments)", xticks=x)
    axes[0].legend()

    case = "e16_dropping_zipf"
    cj = json.load(open(os.path.join(GOLDEN, case, "case.json")))
    T, k = cj["shapes"]["topk_idx"]
    cf = cj["params"]["capacity_factor"]
    idx = load(case, "topk_idx").reshape(-1)
    kept = load(case, "kept")
    kept_per = np.bincount(idx[kept == 1], minlength=E)
    dropped_per = np.bincount(idx[kept == 0], minlength=E)
    C = int(np.floor(cf * T * k / E + 0.5))
    axes[1].bar(x, kept_per, label="kept", color="C2")
    axes[1].bar(x, dropped_per, bottom=kept_per, label="dropped", color="C3")
    axes[1].axhline(C, color="black", lw=0.8, ls="--", label=f"capacity C = round({cf:g} T k / E) = {C}")
    axes[1].set(title=f"dropping ({case}):\n{dropped_per.sum()} of {T * k} assignments dropped "
                      f"({100 * dropped_per.sum() / (T * k):.1f} %)", xlabel="expert", ylabel="rows", xticks=x)
    axes[1].legend()
    fig.savefig(os.path.join(out_dir, "routing_load.png"), dpi=100)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "chapters", "04-moe", "figures"))

#!/usr/bin/python3
"""Chapter 05 figure: an EPLB placement as a GPU x slot heatmap, before and after.

Reads the committed golden case v3_prefill (data/golden/05-eplb; its phy2log and logcnt are the
output of ladder's hierarchical policy on the case's Zipf loads) and draws, for layer 0, the load of
every physical slot of every GPU: before (expert e on GPU e // (E / G), no replicas) and after (the
policy's phy2log; a replicated expert's load is split evenly over its logcnt replicas), with each
GPU's total. Usage: ch05_eplb.py OUT_DIR (make figures)."""
import json
import os
import sys

import numpy as np
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main(out_dir, case="v3_prefill", layer=0):
    d = os.path.join(ROOT, "data", "golden", "05-eplb", case)
    params = json.load(open(os.path.join(d, "case.json")))["params"]
    w = np.load(os.path.join(d, "weight.npy"))[layer]
    phy2log = np.load(os.path.join(d, "phy2log.npy"))[layer]
    logcnt = np.load(os.path.join(d, "logcnt.npy"))[layer]
    G, E, P = params["num_gpus"], len(w), len(phy2log)
    before = w.reshape(G, E // G)
    after = (w[phy2log] / logcnt[phy2log]).reshape(G, P // G)
    vmax = max(before.max(), after.max())
    fig, axes = plt.subplots(2, 2, figsize=(12, 8), gridspec_kw={"width_ratios": [3, 1]}, layout="constrained")
    for row, (name, m) in enumerate([(f"before: {E // G} experts per GPU, no replicas", before),
                                     (f"after: hierarchical, {P // G} slots per GPU", after)]):
        im = axes[row, 0].imshow(m, aspect="auto", cmap="viridis", vmin=0, vmax=vmax)
        axes[row, 0].set(title=name, xlabel="slot on the GPU", ylabel="GPU")
        tot = m.sum(axis=1)
        axes[row, 1].barh(np.arange(G), tot, color="C1")
        axes[row, 1].axvline(tot.mean(), color="grey", lw=0.8)
        axes[row, 1].invert_yaxis()
        axes[row, 1].set(title=f"per GPU: max/mean {tot.max() / tot.mean():.2f}", xlabel="tokens")
    fig.colorbar(im, ax=axes[:, 0].tolist(), label="tokens routed to the slot")
    fig.suptitle(f"EPLB on golden case {case}, layer {layer}: {E} experts, {G} GPUs, {P} slots")
    fig.savefig(os.path.join(out_dir, "placement_heatmap.png"), dpi=100)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "chapters", "05-eplb", "figures"))

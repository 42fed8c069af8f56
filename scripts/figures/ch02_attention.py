#!/usr/bin/python3
"""Chapter 02 figure: FA2's tile grid and loop order for a causal problem with Nq != Nk.

The grid is the one the tiled rung (ref/include/ladder/02-attention/tiled.hpp) walks: Q tiles of Br
rows in the outer loop (one per thread), KV tiles of Bc keys in the inner loop, for KV tiles up to
the last key the tile's last row sees, row i seeing keys j <= i + Nk - Nq (Problem::last_key). Each
tile is drawn as fully visible, on the diagonal (partly masked) or never loaded, numbered in visit
order. Shown for the golden case q97_k113_d32_causal at the awkward tiles 37 x 13 the tests use.
Usage: ch02_attention.py OUT_DIR (make figures)."""
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.patches as patches  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def last_key(i, nq, nk):
    return min(nk - 1, i + nk - nq)


def main(out_dir, nq=97, nk=113, br=37, bc=13):
    fig, ax = plt.subplots(figsize=(11, 6))
    colors = {"full": "#4c9be8", "diagonal": "#f2b134", "skipped": "#e6e6e6"}
    order = 0
    for r0 in range(0, nq, br):
        rows = min(br, nq - r0)
        keys = last_key(r0 + rows - 1, nq, nk) + 1  # KV tiles visited: up to the tile's last row
        for c0 in range(0, nk, bc):
            cols = min(bc, nk - c0)
            if c0 >= keys:
                kind = "skipped"
            elif c0 + cols - 1 <= last_key(r0, nq, nk):
                kind = "full"
            else:
                kind = "diagonal"
            ax.add_patch(patches.Rectangle((c0, r0), cols, rows, facecolor=colors[kind], edgecolor="black", lw=0.8))
            if kind != "skipped":
                order += 1
                ax.text(c0 + cols / 2, r0 + rows / 2, str(order), ha="center", va="center", fontsize=8)
    ax.plot([nk - nq, nk], [0, nq], color="red", lw=1.2, label="last visible key of row i: j = i + Nk - Nq")
    ax.set(xlim=(0, nk), ylim=(nq, 0), xlabel="key j (KV tiles of Bc = 13: inner loop)",
           ylabel="query row i (Q tiles of Br = 37: outer loop, one per thread)",
           title=f"Tiled forward, causal, Nq = {nq}, Nk = {nk}: tiles in visit order")
    handles = [patches.Patch(color=c, label=k) for k, c in
               [("fully visible", colors["full"]), ("on the diagonal (masked in part)", colors["diagonal"]),
                ("never loaded", colors["skipped"])]]
    ax.legend(handles=handles + [ax.get_lines()[0]], loc="upper left", bbox_to_anchor=(1.02, 1), fontsize=8)
    ax.set_aspect("equal")
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "tile_grid.png"), dpi=110)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "chapters", "02-attention", "figures"))

#!/usr/bin/python3
"""Plot the notes' caching/absorption figures as measured on this CPU: time per MLA decode step vs cache
length L for every rung, B = 1 and B = 32 (log-log; predicted points hollow, points that do not fit
the memory budget left out). Input: the CSV `ladder reproduce 03-mla` writes. Run with /usr/bin/python3
(Debian's matplotlib)."""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

RUNGS = ["CD", "CC", "A_CC", "A_CC_ME", "AM", "flash_mla"]


def main(csv_path: str, png_path: str) -> None:
    with open(csv_path) as f:
        rows = list(csv.DictReader(f))
    batches = sorted({int(r["B"]) for r in rows})
    fig, axes = plt.subplots(1, len(batches), figsize=(5.5 * len(batches), 4.2), squeeze=False)
    for ax, b in zip(axes[0], batches):
        for i, rung in enumerate(RUNGS):
            pts = [r for r in rows if int(r["B"]) == b and r["rung"] == rung and r["status"] != "no fit"]
            if not pts:
                continue
            color = f"C{i}"
            ax.plot([int(r["L"]) for r in pts], [1e3 * float(r["seconds"]) for r in pts], "-", color=color, label=rung)
            for r in pts:
                filled = r["status"] == "measured"
                ax.plot(int(r["L"]), 1e3 * float(r["seconds"]), "o", color=color,
                        markerfacecolor=color if filled else "none")
        ax.set(xscale="log", yscale="log", xlabel="cache length L (tokens)", ylabel="ms per decode step",
               title=f"B = {b} (this CPU, fp32; hollow = predicted)")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png_path, dpi=110)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

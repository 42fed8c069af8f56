#!/usr/bin/python3
"""Plot the notes' Fig. 9 as measured on this CPU: speedup and memory reduction of the tiled rungs over
naive attention vs sequence length. Input: the CSV `ladder reproduce 02-attention` writes. Run with
/usr/bin/python3 (Debian's matplotlib)."""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(csv_path: str, png_path: str) -> None:
    with open(csv_path) as f:
        rows = list(csv.DictReader(f))
    n = [int(r["N"]) for r in rows]
    fwd = [float(r["naive_fwd_s"]) / float(r["tiled_fwd_s"]) for r in rows]
    both = [float(r["naive_fwd_bwd_s"]) / float(r["tiled_fwd_bwd_s"]) for r in rows]
    mem = [float(r["memory_naive_bytes"]) / float(r["memory_tiled_bytes"]) for r in rows]

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.plot(n, fwd, "o-", label="forward")
    left.plot(n, both, "s-", label="forward + backward")
    left.axhline(1.0, color="grey", lw=0.8)
    left.set(xscale="log", xlabel="sequence length N", ylabel="speedup (naive time / tiled time)",
             title="Speedup (measured, this CPU)")
    left.set_xticks(n, [str(x) for x in n])
    left.legend()
    right.bar([str(x) for x in n], mem)
    right.set(xlabel="sequence length N", ylabel="memory reduction (naive / tiled)",
              title="Memory reduction (forward + backward)")
    fig.suptitle("ladder 02-attention: the notes' Fig. 9 on a CPU (fp32, d = 64)")
    fig.tight_layout()
    fig.savefig(png_path, dpi=120)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: plot_02_attention.py FIG9.csv OUT.png")
    main(sys.argv[1], sys.argv[2])

#!/usr/bin/python3
"""Chapter 01 figure: the online recurrence (the chapter's Algorithm 2, "Alg. 3" in softmax.hpp) on one row of the golden case len_97.

Reads the committed input x and fp64 output y (data/golden/01-softmax/len_97), runs the recurrence
m_j = max(m_{j-1}, x_j), d_j = d_{j-1} e^{m_{j-1} - m_j} + e^{x_j - m_j} in float64, checks that
e^{x_i - m_V} / d_V reproduces the committed oracle y (so the picture is of the stage's own numbers),
and plots x_j, m_j and d_j. Usage: ch01_softmax.py OUT_DIR (make figures)."""
import os
import sys

import numpy as np
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main(out_dir):
    case = os.path.join(ROOT, "data", "golden", "01-softmax", "len_97")
    x = np.load(os.path.join(case, "x.npy")).astype(np.float64)[0]
    y = np.load(os.path.join(case, "y.npy"))[0]
    m, d, ms, ds = -np.inf, 0.0, [], []
    for v in x:
        mn = max(m, v)
        d = d * np.exp(m - mn) + np.exp(v - mn)
        m = mn
        ms.append(m)
        ds.append(d)
    err = np.max(np.abs(np.exp(x - m) / d - y))
    if err > 1e-15:
        sys.exit(f"ch01_softmax.py: the recurrence does not reproduce the committed oracle (max err {err:.2e})")
    j = np.arange(1, len(x) + 1)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 5.5), sharex=True)
    top.plot(j, x, ".", color="grey", label="x_j")
    top.step(j, ms, where="post", color="C0", label="m_j = max(m_{j-1}, x_j)")
    top.set(ylabel="value", title="the online recurrence (Alg. 3 in softmax.hpp, the chapter's Algorithm 2) on row 0 of len_97 (fp64)")
    top.legend(loc="lower right")
    bottom.step(j, ds, where="post", color="C1", label="d_j = d_{j-1} e^{m_{j-1} - m_j} + e^{x_j - m_j}")
    jumps = [k for k in range(1, len(ms)) if ms[k] > ms[k - 1]]
    bottom.plot(j[jumps], np.array(ds)[jumps], "v", color="C3", label="m jumps: d rescaled")
    bottom.set(xlabel="column j", ylabel="d_j")
    bottom.legend(loc="upper left")
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "online_recurrence.png"), dpi=110)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "chapters", "01-softmax", "figures"))

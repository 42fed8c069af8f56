#!/usr/bin/python3
"""Chapter 06 figures (second half): memory per card stacked by module for every deployment layout,
and the A2 decode step on two streams without and with two-batch overlap.

Runs `ladder plan FILE --json` (the project's own code; LADDER=path/to/ladder or build/bin/ladder)
on every data/deployments/*.json and draws from its output. Usage: ch06_deploy.py [OUT_DIR]
(default chapters/06-disagg/figures; make figures)."""
import glob
import json
import os
import subprocess
import sys
import tempfile

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GROUPS = [  # module rows of `ladder plan` -> the figure's stack
    ("MLA weights", ("MLA down", "MLA up", "MLA out")),
    ("routed experts", ("routed experts",)),
    ("shared expert", ("shared expert",)),
    ("dense FFN", ("dense FFN",)),
    ("embedding + LM head", ("embedding", "LM head")),
    ("KV cache", ("KV cache",)),
    ("activations", ("activations",)),
]


def plan(ladder, layout, tmp):
    out = os.path.join(tmp, os.path.basename(layout))
    subprocess.run([ladder, "plan", layout, "--json", out], check=True, stdout=subprocess.DEVNULL)
    return json.load(open(out))


def memory_figure(plans, out_dir):
    bars, labels = [], []
    for name, p in plans:
        for c in p["cards"]:
            g = {k: 0.0 for k, _ in GROUPS}
            for r in c["rows"]:
                for k, prefixes in GROUPS:
                    if r["module"].startswith(prefixes):
                        g[k] += r["bytes"] / 1e9
            bars.append((g, p["capacity_bytes"] / 1e9))
            labels.append(name + ("" if len(p["cards"]) == 1 else "\n" + c["kind"]))
    fig, ax = plt.subplots(figsize=(10, 4.8))
    bottom = [0.0] * len(bars)
    for k, _ in GROUPS:
        vals = [b[0][k] for b in bars]
        ax.bar(range(len(bars)), vals, bottom=bottom, label=k)
        bottom = [x + v for x, v in zip(bottom, vals)]
    for i, (_, cap) in enumerate(bars):
        ax.plot([i - 0.4, i + 0.4], [cap, cap], "k--", lw=1)
    ax.set_xticks(range(len(bars)))
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_ylabel("GB per card (1e9 B); dashed: card capacity")
    ax.set_title("Per-card memory by module (ladder plan data/deployments/*.json)")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    path = os.path.join(out_dir, "memory_per_card.png")
    fig.savefig(path, dpi=120)
    return path


def timeline_figure(p, out_dir, layers=4):
    colors = {"attention": "tab:blue", "gate": "tab:purple", "ffn": "tab:green", "dispatch": "tab:orange",
              "combine": "tab:red"}
    fig, (a, b) = plt.subplots(2, 1, figsize=(10, 4), sharex=True)
    full = p["layer_full_batch_ms"]
    t = 0.0
    for _ in range(layers):  # one micro-batch: every op after the previous one (MoE layer durations)
        for k in ("attention", "gate", "dispatch", "ffn", "combine"):
            row = 1 if k in ("dispatch", "combine") else 0
            a.barh(row, full[k], left=t, color=colors[k])
            t += full[k]
    a.set_title("A2 decode, no overlap (one batch; %d MoE layers shown)" % layers, fontsize=9)
    for op in p["two_batch_timeline"]:
        k = op["name"].split()[1]
        b.barh(op["stream"], op["end"] - op["start"], left=op["start"], color=colors[k],
               hatch="//" if op["name"].startswith("B") else None, edgecolor="k", lw=0.3)
    b.set_title("two-batch overlap (half micro-batches A plain, B hatched; %d MoE layers)" % layers, fontsize=9)
    for ax in (a, b):
        ax.set_yticks([0, 1])
        ax.set_yticklabels(["compute", "comm"])
    b.set_xlabel("ms")
    # Each entry with its time per layer: an op too short to see as a bar (the gate) still says what it is.
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in colors.values()]
    labels = [f"{k} {full[k]:.3g} ms" if full[k] >= 0.01 else f"{k} {full[k] * 1000:.2g} us (too short to see)"
              for k in colors]
    # Below the axes, so no bar is hidden under it.
    fig.legend(handles, labels, fontsize=7, ncol=5, loc="lower center")
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    path = os.path.join(out_dir, "two_stream_timeline.png")
    fig.savefig(path, dpi=120)
    return path


def main(out_dir):
    ladder = os.environ.get("LADDER", os.path.join(ROOT, "build", "bin", "ladder"))
    if not os.path.exists(ladder):
        sys.exit("ch06_deploy.py: %s not found: build the ladder CLI first (make build) or set LADDER" % ladder)
    os.makedirs(out_dir, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        files = sorted(glob.glob(os.path.join(ROOT, "data", "deployments", "*.json")))
        plans = [(os.path.splitext(os.path.basename(f))[0], plan(ladder, f, tmp)) for f in files]
    print(memory_figure(plans, out_dir))
    print(timeline_figure(dict(plans)["huawei-a2-decode"], out_dir))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "chapters", "06-disagg", "figures"))

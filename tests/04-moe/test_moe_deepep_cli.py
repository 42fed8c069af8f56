#!/usr/bin/python3
"""Stage 04 in DeepEP's dispatch / combine layouts through the `ladder` binary and Python: `ladder deepep write`
writes a normal and a low-latency case, the reference candidate (`ladder deepep run`: the senders' loop, rows in
reverse order) passes `ladder check 04-moe/deepep_MODE CASE DIR --output ...` (exit 0), and so do its rows shuffled
within each segment; mutants fail (exit 1) naming the output: a dropped token (recv_src), recv_topk_idx global
instead of local, an FP8 scale of the wrong 128-block; a receive buffer without recv_src.npy beside it is bad input
(exit 2) naming recv_src. With the Python module's folder given, ladder.deepep_check gives the same verdicts.

    test_moe_deepep_cli.py path/to/ladder [path/to/build/python]
"""
import json
import os
import shutil
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: cli_expect
from cli_expect import Checks  # noqa: E402

LADDER = sys.argv[1]
PYDIR = sys.argv[2] if len(sys.argv) > 2 else None
checks = Checks(LADDER, tail=3000)
expect, verdict = checks.expect, checks.verdict
verdicts = []  # (mode, case, candidate folder, CLI pass)


def variant(src, dst, edit):
    shutil.copytree(src, dst)
    arrays = {f[:-4]: np.load(os.path.join(dst, f)) for f in os.listdir(dst)}
    edit(arrays)
    for name, a in arrays.items():
        np.save(os.path.join(dst, name + ".npy"), a)


def shuffled(a):
    """Rows of every receive segment in another order (a rotation by one), recv_src with them."""
    src = a["recv_src"]
    seg = src.reshape(-1, src.shape[-1])
    for name in ("recv_src", "recv_x", "recv_x_scales", "recv_topk_idx", "recv_topk_weights"):
        if name not in a:
            continue
        b = a[name].reshape(seg.shape[0], seg.shape[1], -1)
        for s in range(seg.shape[0]):
            n = int((seg[s] >= 0).sum())
            b[s, :n] = np.roll(b[s, :n].copy(), 1, axis=0)
        a[name] = b.reshape(a[name].shape)


def dropped(a):
    seg = a["recv_src"].reshape(-1, a["recv_src"].shape[-1])
    s = int(np.flatnonzero((seg >= 0).sum(axis=1) > 0)[0])
    seg[s, int((seg[s] >= 0).sum()) - 1] = -1


def global_idx(a):
    """Each rank's expert offset not subtracted (16 experts on 4 ranks: 4 per rank)."""
    idx = a["recv_topk_idx"]
    for r in range(idx.shape[0]):
        idx[r][idx[r] >= 0] += 4 * r


def wrong_block(a):
    a["recv_x_scales"] = np.roll(a["recv_x_scales"], 1, axis=-1)


with tempfile.TemporaryDirectory() as tmp:
    j = os.path.join
    for mode in ("normal", "low_latency"):
        case, good, stage = j(tmp, mode), j(tmp, mode + "_run"), f"04-moe/deepep_{mode}"
        expect(f"write {mode}", ["deepep", "write", "--mode", mode, "--out", case], 0, "recv_src")
        outs = ",".join(json.load(open(j(case, "case.json")))["outputs"])
        expect(f"run {mode}", ["deepep", "run", case, "--out", good], 0, "wrote")
        expect(f"check run {mode}", ["check", stage, case, good, "--output", outs], 0, "matched")
        verdicts.append((mode, case, good, True))
        variant(good, j(tmp, mode + "_shuffled"), shuffled)
        expect(f"rows shuffled pass {mode}", ["check", stage, case, j(tmp, mode + "_shuffled"), "--output", outs], 0,
               "PASS")
        verdicts.append((mode, case, j(tmp, mode + "_shuffled"), True))
        variant(good, j(tmp, mode + "_dropped"), dropped)
        expect(f"dropped token fails {mode}", ["check", stage, case, j(tmp, mode + "_dropped"), "--output", outs], 1,
               "(recv_src): FAIL")
        verdicts.append((mode, case, j(tmp, mode + "_dropped"), False))
    case = j(tmp, "normal")
    outs = ",".join(json.load(open(j(case, "case.json")))["outputs"])
    variant(j(tmp, "normal_run"), j(tmp, "global"), global_idx)
    expect("recv_topk_idx global fails", ["check", "04-moe/deepep_normal", case, j(tmp, "global"), "--output", outs],
           1, "(recv_topk_idx): FAIL")
    verdicts.append(("normal", case, j(tmp, "global"), False))
    ll = j(tmp, "low_latency")
    variant(j(tmp, "low_latency_run"), j(tmp, "block"), wrong_block)
    expect("FP8 scale of the wrong block fails", ["check", "04-moe/deepep_low_latency", ll, j(tmp, "block"),
                                                  "--output", "recv_x_scales"], 1, "(recv_x_scales): FAIL")
    verdicts.append(("low_latency", ll, j(tmp, "block"), False))
    os.makedirs(j(tmp, "alone"))
    shutil.copy(j(tmp, "normal_run", "recv_x.npy"), j(tmp, "alone"))
    expect("recv_x without recv_src", ["check", "04-moe/deepep_normal", case, j(tmp, "alone", "recv_x.npy"),
                                       "--output", "recv_x"], 2, "recv_src")
    expect("bad --mode", ["deepep", "write", "--mode", "lowlatency", "--out", j(tmp, "x")], 2, "--mode")
    expect("bad --experts", ["deepep", "write", "--experts", "10", "--out", j(tmp, "x")], 2, "num_experts")
    if PYDIR:
        sys.path.insert(0, PYDIR)
        import ladder
        for mode, case, d, want in verdicts:
            outputs = {f[:-4]: np.load(j(d, f)) for f in os.listdir(d)}
            r = ladder.deepep_check(mode, case, outputs)
            verdict(f"python agrees on {os.path.basename(d)} ({mode}): pass={r['pass']}", r["pass"] == want)

sys.exit(checks.exit_code())

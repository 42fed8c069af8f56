#!/usr/bin/python3
"""`ladder describe / check / reproduce 07-precision` end to end: exit 0 pass, 1 fail, 2 bad input in one line.

    test_precision_cli.py path/to/ladder path/to/data/golden/07-precision
Candidates are made with numpy from the committed expected outputs, as another project would.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

LADDER, GOLDEN = sys.argv[1], sys.argv[2]
failures = 0


def expect(name, args, rc, out_has="", err_one_line=False):
    global failures
    p = subprocess.run([LADDER, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ok = p.returncode == rc and out_has in p.stdout + p.stderr
    if err_one_line:
        ok = ok and len(p.stderr.strip().splitlines()) == 1 and p.stderr.startswith("ladder: error: ")
    print(f"{'ok  ' if ok else 'FAIL'} {name}: exit {p.returncode} (want {rc})")
    if not ok:
        print(p.stdout, p.stderr)
        failures += 1


with tempfile.TemporaryDirectory() as tmp:
    j = os.path.join
    expect("list names the stage", ["list"], 0, "07-precision")
    expect("describe names the bound rule", ["describe", "07-precision"], 0, "rule bound")
    for case in ["a8w8_outliers", "fp8_blocks", "moe_a8w4_g128"]:
        d = j(GOLDEN, case)
        y = np.load(j(d, "y.npy"))
        good = j(tmp, f"{case}_good.npy")
        np.save(good, y.astype(np.float32))
        expect(f"{case}: the oracle rounded to float32 passes", ["check", "07-precision", d, good, "--output", "y"], 0,
               "PASS (bound rule)")
        bad = y.astype(np.float32)
        bad[1] *= np.float32(1.02)  # one token's outputs 2 % off (a neighbouring tile's scale would be worse)
        badp = j(tmp, f"{case}_bad.npy")
        np.save(badp, bad)
        expect(f"{case}: one token 2 % off fails", ["check", "07-precision", d, badp, "--output", "y"], 1, "FAIL")
        xq = np.load(j(d, "xq.npy"))
        xq_bad = xq.copy()
        xq_bad[0, 0] += 1
        xp = j(tmp, f"{case}_xq.npy")
        np.save(xp, xq_bad)
        expect(f"{case}: one code off fails", ["check", "07-precision", d, xp, "--output", "xq"], 1, "FAIL")
    expect("acc of an fp8 case: one-line error", ["check", "07-precision", j(GOLDEN, "fp8_blocks"),
           j(GOLDEN, "fp8_blocks", "y.npy"), "--output", "acc"], 2, "acc", err_one_line=True)
    expect("reproduce prints the curve", ["reproduce", "07-precision", "--quick", "--out", tmp], 0, "promoted")
    expect("reproduce prints SmoothQuant's table", ["reproduce", "07-precision", "--quick", "--out", tmp], 0,
           "smoothed per-token")
    # FlashMLA states 656 bytes per token; the reproduce derives it from V3's kv_lora and rope dims.
    expect("reproduce measures rung (d)'s errors beside their bounds", ["reproduce", "07-precision", "--quick", "--out",
           tmp], 0, "| moe_a8w4 |")
    expect("reproduce derives FlashMLA's 656-byte FP8 record", ["reproduce", "07-precision", "--quick", "--out", tmp],
           0, "bf16 RoPE) | 656 |")
sys.exit(1 if failures else 0)

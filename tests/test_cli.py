#!/usr/bin/python3
"""The `ladder` binary end to end: exit codes 0 / 1 / 2 and one readable line for bad input.

    test_cli.py path/to/ladder
Uses numpy (Debian python3-numpy) to make candidates, as another project using ladder as an oracle would.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

LADDER = sys.argv[1]
failures = 0


def run(*args):
    p = subprocess.run([LADDER, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return p.returncode, p.stdout, p.stderr


def expect(name, args, rc, out_has="", err_one_line=False):
    global failures
    got_rc, out, err = run(*args)
    ok = got_rc == rc and out_has in out + err
    if err_one_line:
        ok = ok and len(err.strip().splitlines()) == 1 and err.startswith("ladder: error: ")
    print(f"{'ok  ' if ok else 'FAIL'} {name}: exit {got_rc} (want {rc})")
    if not ok:
        print(out, err)
        failures += 1


with tempfile.TemporaryDirectory() as tmp:
    case = os.path.join(tmp, "case")
    expect("list", ["list", "01-softmax"], 0, "online softmax (notes Alg. 3)")
    expect("golden lists cases", ["golden", "01-softmax"], 0, "len_1025")
    expect("golden writes a case", ["golden", "01-softmax", "--case", "len_97", "--out", case], 0, "wrote")
    x = np.load(os.path.join(case, "x.npy"))
    y = np.load(os.path.join(case, "y.npy"))
    assert x.dtype == np.float32 and y.dtype == np.float64 and x.shape == (4, 97)

    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    good = (e / e.sum(axis=1, keepdims=True)).astype(np.float32)
    np.save(os.path.join(tmp, "good.npy"), good)
    expect("check: a correct float32 candidate passes", ["check", "01-softmax", case, os.path.join(tmp, "good.npy")],
           0, "PASS")
    bad = good.copy()
    i = np.unravel_index(np.argmax(bad), bad.shape)
    bad[i] *= np.float32(1.001)
    np.save(os.path.join(tmp, "bad.npy"), bad)
    expect("check: a perturbed candidate fails with the report", ["check", "01-softmax", case,
           os.path.join(tmp, "bad.npy")], 1, "exceeds tolerance")
    np.save(os.path.join(tmp, "transposed.npy"), np.ascontiguousarray(good.T))
    expect("check: a transposed candidate fails", ["check", "01-softmax", case, os.path.join(tmp, "transposed.npy")],
           1, "shape")
    with open(os.path.join(tmp, "good.npy"), "rb") as f:
        head = f.read(50)
    with open(os.path.join(tmp, "trunc.npy"), "wb") as f:
        f.write(head)
    expect("check: a truncated .npy is bad input", ["check", "01-softmax", case, os.path.join(tmp, "trunc.npy")], 2,
           "truncated", err_one_line=True)
    np.save(os.path.join(tmp, "ints.npy"), np.zeros((4, 97), dtype=np.int16))
    expect("check: an unsupported dtype is bad input", ["check", "01-softmax", case, os.path.join(tmp, "ints.npy")],
           2, "unsupported dtype", err_one_line=True)
    expect("check: a missing case folder is bad input", ["check", "01-softmax", os.path.join(tmp, "nope"),
           os.path.join(tmp, "good.npy")], 2, "CASE_DIR", err_one_line=True)
    expect("golden: an unknown case is bad input", ["golden", "01-softmax", "--case", "nope", "--out", case], 2,
           "not a case", err_one_line=True)
    expect("reproduce: an unknown stage is bad input", ["reproduce", "99-nothing"], 2, "no stage",
           err_one_line=True)
    expect("an unknown subcommand is bad input", ["frobnicate"], 2, "", err_one_line=True)
    eplb = os.path.join(tmp, "eplb")
    expect("golden writes an EPLB case", ["golden", "05-eplb", "--case", "readme_hierarchical", "--out", eplb], 0,
           "wrote")
    phy2log = np.load(os.path.join(eplb, "phy2log.npy"))
    np.save(os.path.join(tmp, "phy2log_i4.npy"), phy2log.astype(np.int32))
    expect("check 05-eplb: an exact int32 phy2log passes", ["check", "05-eplb", eplb,
           os.path.join(tmp, "phy2log_i4.npy")], 0, "PASS (exact)")
    wrong = phy2log.copy()
    wrong[0, [0, 1]] = wrong[0, [1, 0]]
    np.save(os.path.join(tmp, "phy2log_swapped.npy"), wrong)
    expect("check 05-eplb: two swapped slots fail", ["check", "05-eplb", eplb,
           os.path.join(tmp, "phy2log_swapped.npy")], 1, "mismatching")
    expect("check 05-eplb: a float candidate is bad input", ["check", "05-eplb", eplb,
           os.path.join(eplb, "weight.npy")], 2, "integer dtype", err_one_line=True)
    expect("reproduce 01-softmax --quick writes the table", ["reproduce", "01-softmax", "--quick", "--out",
           os.path.join(tmp, "r")], 0, "paper")

sys.exit(1 if failures else 0)

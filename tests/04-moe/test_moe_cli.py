#!/usr/bin/python3
"""`ladder check / oracle / describe 04-moe` end to end: exit 0 pass, 1 fail, 2 bad input in one line.

    test_moe_cli.py path/to/ladder path/to/data/golden/04-moe
Candidates are made with numpy from the committed expected outputs, as another project would.
"""
import json
import os
import shutil
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: cli_expect
from cli_expect import Checks  # noqa: E402

LADDER, GOLDEN = sys.argv[1], sys.argv[2]
checks = Checks(LADDER)
expect, verdict = checks.expect, checks.verdict


def save(tmp, name, a):
    path = os.path.join(tmp, name)
    np.save(path, a)
    return path


with tempfile.TemporaryDirectory() as tmp:
    j = os.path.join
    expect("describe names the outputs and rules", ["describe", "04-moe"], 0, "group_sizes")
    for case in ["e8_T7", "e16_T128", "e16_dropping_zipf"]:
        d = j(GOLDEN, case)
        y = np.load(j(d, "y.npy"))
        good = save(tmp, f"{case}_good.npy", y.astype(np.float32))
        expect(f"{case}: the oracle rounded to float32 passes", ["check", "04-moe", d, good], 0, "PASS")
        expect(f"{case}: the float64 oracle itself passes", ["check", "04-moe", d, j(d, "y.npy")], 0, "PASS")
        off = y.astype(np.float32)
        off[min(3, y.shape[0] - 1)] *= np.float32(1.001)  # one token's output 0.1 % off
        expect(f"{case}: one token's output off fails", ["check", "04-moe", d, save(tmp, f"{case}_off.npy", off)], 1,
               "FAIL")
        idx = np.load(j(d, "topk_idx.npy"))
        expect(f"{case}: the committed topk_idx passes as int32",
               ["check", "04-moe", d, save(tmp, f"{case}_idx.npy", idx.astype(np.int32)), "--output", "topk_idx"], 0,
               "PASS")
        swapped = idx.copy()
        swapped[0, [0, 1]] = swapped[0, [1, 0]]  # the same experts in the wrong (score) order
        expect(f"{case}: a swapped topk index fails",
               ["check", "04-moe", d, save(tmp, f"{case}_swapped.npy", swapped), "--output", "topk_idx"], 1, "FAIL")
        gs = np.load(j(d, "group_sizes.npy"))
        moved = gs.copy()
        a = int(np.argmax(moved))
        moved[a] -= 1
        moved[(a + 1) % len(moved)] += 1  # one row counted in the next expert
        expect(f"{case}: group sizes with one row moved fail",
               ["check", "04-moe", d, save(tmp, f"{case}_gs.npy", moved), "--output", "group_sizes"], 1, "FAIL")
        expect(f"{case}: a wrong-shaped candidate is bad input",
               ["check", "04-moe", d, save(tmp, f"{case}_short.npy", off[:, :-1])], 2, "shape", err_one_line=True)

    d = j(GOLDEN, "e16_dropping_zipf")
    kept = np.load(j(d, "kept.npy"))
    expect("dropping: the kept mask passes", ["check", "04-moe", d, save(tmp, "kept.npy", kept), "--output", "kept"], 0,
           "PASS")
    expect("dropping: keeping every assignment fails",
           ["check", "04-moe", d, save(tmp, "all.npy", np.ones_like(kept)), "--output", "kept"], 1, "FAIL")
    expect("a dropless case has no kept output", ["check", "04-moe", j(GOLDEN, "e8_T7"), j(tmp, "kept.npy"),
           "--output", "kept"], 2, "kept", err_one_line=True)
    expect("float topk_idx is bad input", ["check", "04-moe", j(GOLDEN, "e8_T7"), j(tmp, "e8_T7_good.npy"),
           "--output", "topk_idx"], 2, "integer dtype", err_one_line=True)
    expect("an unknown output is named", ["check", "04-moe", j(GOLDEN, "e8_T7"), j(tmp, "e8_T7_good.npy"),
           "--output", "topk"], 2, "topk_idx", err_one_line=True)

    # A tampered shared model: the model folder's digest covers its weights, so the check refuses it.
    root = j(tmp, "golden")
    os.makedirs(root)
    shutil.copytree(j(GOLDEN, "model"), j(root, "model"))
    shutil.copytree(j(GOLDEN, "e8_T7"), j(root, "e8_T7"))
    w1 = np.load(j(root, "model", "w1.npy"))
    w1[0, 0, 0] += np.float32(0.5)
    np.save(j(root, "model", "w1.npy"), w1)
    expect("a tampered model folder is bad input", ["check", "04-moe", j(root, "e8_T7"), j(tmp, "e8_T7_good.npy")], 2,
           "sha256", err_one_line=True)

    # A case written alone carries its model; `ladder oracle` on user inputs writes a checkable folder.
    alone = j(tmp, "alone")
    expect("golden writes a case with its weights", ["golden", "04-moe", "--case", "e8_T7", "--out", alone], 0, "wrote")
    expect("check reads a case written alone", ["check", "04-moe", alone, j(tmp, "e8_T7_good.npy")], 0, "PASS")
    ins = j(tmp, "inputs")
    os.makedirs(ins)
    for f in ["x", "bias"]:
        shutil.copy(j(alone, f + ".npy"), ins)
    for f in ["W_gate", "w1", "w3", "w2", "s1", "s3", "s2"]:
        shutil.copy(j(alone, f + ".npy"), ins)
    with open(j(alone, "case.json")) as f:
        params = json.load(f)["params"]
    with open(j(ins, "params.json"), "w") as f:
        json.dump(params, f)
    expect("oracle on user inputs", ["oracle", "04-moe", "--inputs", ins, "--out", j(tmp, "o")], 0, "wrote")
    expect("check on the oracle's folder", ["check", "04-moe", j(tmp, "o"), j(tmp, "e8_T7_good.npy")], 0, "PASS")
    params["top_k"] = 9
    with open(j(ins, "params.json"), "w") as f:
        json.dump(params, f)
    expect("oracle: top_k > n_experts is bad input", ["oracle", "04-moe", "--inputs", ins, "--out", j(tmp, "o2")], 2,
           "top_k", err_one_line=True)

    # No shared expert (Fs = 0): the committed case holds s1, s3 [D, 0] and s2 [0, D], read before the model's.
    d = j(GOLDEN, "e8_no_shared")
    assert np.load(j(d, "s1.npy")).shape == (97, 0) and np.load(j(d, "s2.npy")).shape == (0, 97)
    x, y = np.load(j(d, "x.npy")).astype(np.float64), np.load(j(d, "y.npy"))
    s1, s3, s2 = (np.load(j(GOLDEN, "model", f + ".npy")).astype(np.float64) for f in ("s1", "s3", "s2"))
    h = x @ s1
    shared = (h / (1 + np.exp(-h)) * (x @ s3)) @ s2  # the model's shared expert, which this layer does not have
    ns_good = save(tmp, "ns_good.npy", y.astype(np.float32))
    expect("no shared expert: the oracle rounded to float32 passes", ["check", "04-moe", d, ns_good], 0, "PASS")
    expect("no shared expert: a candidate that adds a shared expert's output fails",
           ["check", "04-moe", d, save(tmp, "ns_shared.npy", (y + shared).astype(np.float32))], 1, "FAIL")
    # The other spelling, s1, s3, s2 absent: `ladder oracle` on inputs without them gives the same y.
    ns_alone, ns_in = j(tmp, "ns_alone"), j(tmp, "ns_inputs")
    expect("golden writes the no-shared case whole", ["golden", "04-moe", "--case", "e8_no_shared", "--out", ns_alone],
           0, "wrote")
    expect("check reads it", ["check", "04-moe", ns_alone, ns_good], 0, "PASS")
    os.makedirs(ns_in)
    for f in ["x", "bias", "W_gate", "w1", "w3", "w2"]:
        shutil.copy(j(ns_alone, f + ".npy"), ns_in)
    with open(j(ns_alone, "case.json")) as f, open(j(ns_in, "params.json"), "w") as g:
        json.dump(json.load(f)["params"], g)
    expect("oracle without s1, s3, s2", ["oracle", "04-moe", "--inputs", ns_in, "--out", j(tmp, "ns_o")], 0, "wrote")
    same = np.load(j(tmp, "ns_o", "y.npy")).tobytes() == y.tobytes()
    verdict("oracle without s1, s3, s2: y is the committed golden, byte for byte", same)
    expect("check without s1, s3, s2: the float32 rounding passes", ["check", "04-moe", j(tmp, "ns_o"), ns_good], 0,
           "PASS")
    expect("check without s1, s3, s2: a shared expert's output fails",
           ["check", "04-moe", j(tmp, "ns_o"), j(tmp, "ns_shared.npy")], 1, "FAIL")
    shutil.copy(j(ns_alone, "s1.npy"), ns_in)
    expect("oracle: s1 without s3, s2 is named", ["oracle", "04-moe", "--inputs", ns_in, "--out", j(tmp, "ns_x")], 2,
           "s1, s3, s2", err_one_line=True)

    # The chapter's table of rungs is the registry's list of reference rungs, checked here against it.
    p = checks.run("list", "04-moe")
    registered = [l.split()[2] for l in p.stdout.splitlines() if l.startswith("04-moe ") and l.split()[1] == "ref"]
    chapter = os.path.join(os.path.dirname(GOLDEN), "..", "..", "chapters", "04-moe", "README.md")
    with open(chapter) as f:
        tabled = [l.split("`")[1] for l in f if l.startswith("| `")]
    ok = p.returncode == 0 and len(registered) >= 7 and tabled == registered
    verdict("the chapter's rung table lists the registered rungs in order", ok, f"{registered} {tabled}")

    # The reproduce table: every number from the sources matches, computed (never typed in).
    p = checks.run("reproduce", "04-moe", "--quick", "--out", j(tmp, "rep"))
    wanted = ["= 144: exact match", "mean 144 (exact match)", "= 3 BS h (exact match)", "= 6 BS h (exact match)",
              "+ 32 redundant (printed 32 redundant: exact match)", "E / k = 32"]
    ok = p.returncode == 0 and "DIFFERS" not in p.stdout and all(w in p.stdout for w in wanted)
    ok = ok and os.path.exists(j(tmp, "rep", "04-moe.md"))
    verdict("reproduce 04-moe --quick: every source number matches", ok,
            f"{p.stdout} {p.stderr} {[w for w in wanted if w not in p.stdout]}")

    # The volumes counted at the MPI calls (ladder-ep-moe under mpirun, built beside ladder in this build):
    # the hierarchical AllGather exactly 3 BS on every card, every layer run passing, never "NOT RUN".
    if os.path.exists(j(os.path.dirname(LADDER), "ladder-ep-moe")):
        import re
        rows = re.findall(r"^(ag-rs|a2a)\s+(balanced|zipf)\s+([0-9.]+) BS\s+([0-9.]+) BS\s+(PASS|FAIL)$", p.stdout, re.M)
        ok = (len(rows) == 4 and all(r[4] == "PASS" for r in rows)
              and all(r[2] == r[3] == "3.000" for r in rows if r[0] == "ag-rs")
              and all(5.0 <= float(r[2]) <= 7.0 for r in rows if r[0] == "a2a") and "NOT RUN" not in p.stdout)
        verdict("reproduce 04-moe: inter-node rows counted at the MPI calls (ag-rs 3 BS, a2a ~6 BS)", ok,
                f"{rows} {p.stdout[-3000:]}")
    else:
        print("note: ladder-ep-moe not built beside ladder (no MPI in this build): the MPI-counted table is not checked")

print(f"{checks.failures} failure(s)")
sys.exit(checks.exit_code())

#!/usr/bin/python3
"""The `ladder` binary end to end: exit codes 0 / 1 / 2 and one readable line for bad input.

    test_cli.py path/to/ladder
Uses numpy (Debian python3-numpy) to make candidates, as another project using ladder as an oracle would.
"""
import json
import os
import re
import shutil
import sys
import tempfile

import numpy as np

from cli_expect import Checks

LADDER = sys.argv[1]
checks = Checks(LADDER)
expect, verdict = checks.expect, checks.verdict


def oracle_cli_cases(tmp, case, eplb, good):
    """Contracts for every stage, wrong candidates fail, bad input is one line, exit 2."""
    j = os.path.join
    y = np.load(j(case, "y.npy"))
    small = y.copy()
    small[small < 1e-3] *= 1.05
    np.save(j(tmp, "small.npy"), small.astype(np.float32))
    expect("check: small probabilities x 1.05 fail (element-wise rule)", ["check", "01-softmax", case,
           j(tmp, "small.npy")], 1, "elementwise")
    neg = y.copy()
    neg[neg < 1e-4] *= -1
    np.save(j(tmp, "neg.npy"), neg.astype(np.float32))
    expect("check: negative probabilities fail", ["check", "01-softmax", case, j(tmp, "neg.npy")], 1, "negative")
    expect("check: a misspelt stage names the nearest", ["check", "01-sofmax", case, j(tmp, "good.npy")], 2,
           "did you mean '01-softmax'", err_one_line=True)
    expect("a misspelt command is named", ["chek", "01-softmax"], 2, "'chek'", err_one_line=True)
    expect("check: a folder as the candidate is bad input", ["check", "01-softmax", case, tmp], 2, "is a folder",
           err_one_line=True)
    expect("describe prints the contract", ["describe", "02-attention"], 0, "rule max_abs")
    # A tampered case folder: y.npy replaced by an unrelated array is refused.
    tampered = j(tmp, "tampered")
    expect("golden writes a case to tamper with", ["golden", "01-softmax", "--case", "len_97", "--out", tampered], 0)
    np.save(j(tampered, "y.npy"), np.zeros_like(y))
    expect("check: a tampered folder is refused", ["check", "01-softmax", tampered, j(tmp, "good.npy")], 2,
           "digest", err_one_line=True)
    # A digest key that names a path outside the folder is refused before anything is read through it.
    import json
    escape = j(tmp, "escape")
    expect("golden writes a case to point outside", ["golden", "01-softmax", "--case", "len_97", "--out", escape], 0)
    with open(j(escape, "case.json")) as f:
        manifest = json.load(f)
    manifest["digest"]["../good.npy"] = "sha256:00"
    with open(j(escape, "case.json"), "w") as f:
        json.dump(manifest, f)
    expect("check: a digest key with a path is refused", ["check", "01-softmax", escape, j(tmp, "good.npy")], 2,
           "plain file name", err_one_line=True)
    # oracle on the user's own inputs, then check; every stage with a contract.
    ins = j(tmp, "ins")
    os.makedirs(ins)
    rng = np.random.default_rng(5)
    np.save(j(ins, "x.npy"), (rng.standard_normal((3, 59)) * 4).astype(np.float32))
    expect("oracle 01-softmax on user inputs", ["oracle", "01-softmax", "--inputs", ins, "--out", j(tmp, "o1")], 0,
           "wrote")
    x = np.load(j(ins, "x.npy"))
    e = np.exp(x - x.max(1, keepdims=True))
    np.save(j(tmp, "mine.npy"), e / e.sum(1, keepdims=True))
    expect("check on the oracle's folder passes numpy float32", ["check", "01-softmax", j(tmp, "o1"),
           j(tmp, "mine.npy")], 0, "PASS")
    np.save(j(ins, "x.npy"), np.zeros((3, 59), dtype=np.float64))
    expect("oracle: a wrong input dtype is bad input", ["oracle", "01-softmax", "--inputs", ins, "--out",
           j(tmp, "o2")], 2, "<f4", err_one_line=True)
    att = j(tmp, "att")
    os.makedirs(att)
    for n, s in [("Q", (1, 2, 5, 7)), ("K", (1, 2, 6, 7)), ("V", (1, 2, 6, 7)), ("dO", (1, 2, 5, 7))]:
        np.save(j(att, n + ".npy"), rng.standard_normal(s).astype(np.float32))
    expect("oracle 02-attention on user shapes", ["oracle", "02-attention", "--inputs", att, "--out", j(tmp, "o3")],
           0, "wrote")
    o = np.load(j(tmp, "o3", "O.npy"))
    np.save(j(tmp, "O32.npy"), o.astype(np.float32))
    expect("check 02-attention O passes", ["check", "02-attention", j(tmp, "o3"), j(tmp, "O32.npy"), "--output", "O"],
           0, "PASS")
    # A float64 candidate that sums in another order (numpy's own attention) is a right answer: it must pass
    # (within the oracle's derived error bound + its own, core/fp64_bound.hpp); the same candidate with one
    # element off by 1e-9 is wrong and must fail, and so does the float32 answer written as float64.
    q, kk, v = (np.load(j(att, n + ".npy")).astype(np.float64) for n in ("Q", "K", "V"))
    s = np.einsum("bhqd,bhkd->bhqk", q, kk) / np.sqrt(q.shape[-1])
    p = np.exp(s - s.max(-1, keepdims=True))
    o64 = np.einsum("bhqk,bhkd->bhqd", p / p.sum(-1, keepdims=True), v)
    np.save(j(tmp, "O64.npy"), o64)
    expect("check 02-attention: numpy float64 O passes", ["check", "02-attention", j(tmp, "o3"), j(tmp, "O64.npy"),
           "--output", "O"], 0, "PASS")
    np.save(j(tmp, "O32as64.npy"), o.astype(np.float32).astype(np.float64))
    expect("check 02-attention: a float32 O written as float64 fails", ["check", "02-attention", j(tmp, "o3"),
           j(tmp, "O32as64.npy"), "--output", "O"], 1, "derived float64 bound")
    o64[0, 1, 2, 3] += 1e-9
    np.save(j(tmp, "O64bad.npy"), o64)
    expect("check 02-attention: float64 O off by 1e-9 fails", ["check", "02-attention", j(tmp, "o3"),
           j(tmp, "O64bad.npy"), "--output", "O"], 1, "FAIL")
    mla_cases(tmp, rng)
    # EPLB: the float32 reproducer, case.json from `ladder eplb --out`, and the valid rule.
    with open(j(tmp, "w.json"), "w") as f:
        f.write("[[8, 0, 4, 10, 1]]")
    ep = j(tmp, "ep")
    expect("eplb --out writes a case folder", ["eplb", "--weights", j(tmp, "w.json"), "--replicas", "9", "--gpus", "3",
           "--out", ep], 0, "case.json")
    assert np.load(j(ep, "phy2log.npy")).tolist() == [[2, 0, 1, 3, 3, 4, 3, 0, 0]], np.load(j(ep, "phy2log.npy"))
    better = np.array([[2, 3, 1, 3, 3, 4, 0, 0, 0]])
    np.save(j(tmp, "better.npy"), better)
    expect("check 05-eplb: a better placement fails the exact rule", ["check", "05-eplb", ep, j(tmp, "better.npy")],
           1, "[0, 1]")
    expect("check 05-eplb --rule valid: a better placement passes", ["check", "05-eplb", ep, j(tmp, "better.npy"),
           "--rule", "valid"], 0, "PASS (valid rule)")
    reordered = np.array([[0, 2, 1, 3, 3, 4, 0, 3, 0]])
    np.save(j(tmp, "reordered.npy"), reordered)
    expect("check 05-eplb --rule valid: the same experts per GPU in another order pass", ["check", "05-eplb", ep,
           j(tmp, "reordered.npy"), "--rule", "valid"], 0, "PASS")
    np.save(j(tmp, "unplaced.npy"), np.array([[2, 0, 0, 3, 3, 0, 3, 0, 0]]))
    expect("check 05-eplb --rule valid: an expert left out fails", ["check", "05-eplb", ep, j(tmp, "unplaced.npy"),
           "--rule", "valid"], 1, "logcnt")
    expect("check 05-eplb: the exact rule names the broken invariant too", ["check", "05-eplb", ep,
           j(tmp, "unplaced.npy")], 1, "invariant every_expert_placed")
    expect("mutants: every mutant caught, every correct variant passed", ["mutants"], 0, "mutants caught")
    np.save(j(tmp, "logcnt_as.npy"), np.load(j(ep, "logcnt.npy")))
    expect("check 05-eplb: logcnt given as phy2log is named", ["check", "05-eplb", ep, j(tmp, "logcnt_as.npy")], 2,
           "--output logcnt", err_one_line=True)
    expect("eplb: a huge --replicas is refused up front", ["eplb", "--weights", j(tmp, "w.json"), "--replicas",
           "99999999999", "--gpus", "3"], 2, "--replicas", err_one_line=True)
    with open(j(tmp, "big.json"), "w") as f:
        f.write("[[1e308, 1, 2]]")
    expect("eplb: loads beyond float32 are named", ["eplb", "--weights", j(tmp, "big.json"), "--replicas", "3",
           "--gpus", "3"], 2, "--weights[0][0]", err_one_line=True)
    expect("eplb: --out on an existing file is refused before any output", ["eplb", "--weights", j(tmp, "w.json"),
           "--replicas", "9", "--gpus", "3", "--out", j(tmp, "w.json")], 2, "not a folder", err_one_line=True)
    expect("eplb: a folder as weights is named", ["eplb", "--weights", tmp + "/x.json", "--replicas", "9", "--gpus",
           "3"], 2, "no such file", err_one_line=True)
    with open(j(ep, "case.json")) as f:
        cj = f.read()
    with open(j(ep, "case.json"), "w") as f:
        f.write(cj.replace('"stage": "05-eplb"', '"stage": 5'))
    expect("check: a wrongly typed case.json field is named", ["check", "05-eplb", ep, j(tmp, "better.npy")], 2,
           '"stage"', err_one_line=True)


def plan_cases(tmp):
    """`ladder plan`: a committed layout prints its tables; bad layouts are one line naming file and field."""
    import json
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "deployments")
    good = os.path.join(root, "huawei-a2-decode.json")
    expect("plan: the A2 decode layout prints memory, traffic and the report's figures", ["plan", good], 0,
           "about 11.6 \"GB\"")
    layout = json.load(open(good))
    bad = dict(layout)
    del bad["cards"]
    path = os.path.join(tmp, "no-cards.json")
    json.dump(bad, open(path, "w"))
    expect("plan: a layout without cards is bad input", ["plan", path], 2, "no-cards.json: cards is required",
           err_one_line=True)
    bad = json.loads(json.dumps(layout))
    bad["cards"] = 24
    for m in ("mla_down", "mla_up"):
        bad["modules"][m]["dp"] = 24
    bad["modules"]["mla_out"] = {"dp": 2, "tp": 12}
    path = os.path.join(tmp, "tp12.json")
    json.dump(bad, open(path, "w"))
    expect("plan: TP 12 does not divide 128 heads", ["plan", path], 2,
           "tp12.json: modules.mla_out.tp = 12 must divide num_attention_heads = 128", err_one_line=True)


def gradient_list_cases(tmp):
    """--output A,B,C judges a folder of outputs; --ftz is accepted. One-key attention: dQ, dK exactly 0."""
    case = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "golden", "02-attention",
                        "q1_k1_d32")
    out = os.path.join(tmp, "grads")
    expect("run 02-attention backward_recompute (float32)", ["run", "02-attention", "backward_recompute", "--case",
           case, "--out", out], 0)
    expect("check --output dQ,dK,dV: the float32 FA2 backward passes", ["check", "02-attention", case, out,
           "--output", "dQ,dK,dV", "--ftz"], 0, "dV.npy")
    dk = np.load(os.path.join(out, "dK.npy"))
    dv = np.load(os.path.join(out, "dV.npy"))
    dk += np.float32(1e-3) * np.abs(dv).max()  # a wrong gradient where the true one is exactly 0
    np.save(os.path.join(out, "dK.npy"), dk)
    expect("check --output dQ,dK,dV: a wrong dK fails the list", ["check", "02-attention", case, out,
           "--output", "dQ,dK,dV"], 1, "FAIL")
    expect("check --output with a list needs a folder", ["check", "02-attention", case, os.path.join(out, "dQ.npy"),
           "--output", "dQ,dK"], 2, "folder", err_one_line=True)


def device_cases(tmp):
    """--device: FTZ on by default (--no-ftz turns it off) and the report says so; --ftz with --no-ftz is refused."""
    case = os.path.join(tmp, "mixed")
    expect("golden writes mixed_scales", ["golden", "01-softmax", "--case", "mixed_scales", "--out", case], 0, "wrote")
    y = np.load(os.path.join(case, "y.npy")).astype(np.float32)
    tiny = np.finfo(np.float32).tiny
    flushed = np.where(np.abs(y) < tiny, np.float32(0), y)
    assert (flushed != y).any(), "mixed_scales has a subnormal probability"
    path = os.path.join(tmp, "flushed.npy")
    np.save(path, flushed)
    expect("check: a flushed subnormal fails on the host rule", ["check", "01-softmax", case, path], 1, "FAIL")
    expect("check --device: FTZ is on for a device candidate", ["check", "01-softmax", case, path, "--device"], 0,
           "device candidate: FTZ on")
    expect("check --device --no-ftz: off again", ["check", "01-softmax", case, path, "--device", "--no-ftz"], 1,
           "FTZ off")
    expect("check --ftz --no-ftz is bad input", ["check", "01-softmax", case, path, "--ftz", "--no-ftz"], 2, "",
           err_one_line=True)


def attention_shape_cases(tmp):
    """02-attention's oracle-only shapes from the CLI: GQA gradients pass, other rungs refuse by name, a
    forward-only case checks O and names the missing dO for dQ."""
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "golden", "02-attention")
    gqa, fwd = os.path.join(root, "gqa_h4_kv2_q19_k23_d32_causal"), os.path.join(root, "fwd_gqa_h8_kv2_q3_k50_d64_dv32")
    out = os.path.join(tmp, "gqa")
    expect("run 02-attention tiled on a GQA case is refused", ["run", "02-attention", "tiled", "--case", gqa, "--out",
           out], 2, "H_q = 4, H_kv = 2 violates H_q == H_kv", err_one_line=True)
    expect("run 02-attention backward_naive on a GQA case", ["run", "02-attention", "backward_naive", "--case", gqa,
           "--out", out], 0)
    expect("check --output dQ,dK,dV on GQA: the float32 naive backward passes", ["check", "02-attention", gqa, out,
           "--output", "dQ,dK,dV"], 0, "dK.npy")
    dk = np.load(os.path.join(out, "dK.npy"))
    np.save(os.path.join(out, "dK.npy"), dk[:, ::-1].copy())  # kv heads swapped
    expect("check on GQA: dK of the wrong kv heads fails", ["check", "02-attention", gqa, os.path.join(out, "dK.npy"),
           "--output", "dK"], 1, "FAIL")
    o = os.path.join(tmp, "fwd_O.npy")
    np.save(o, np.load(os.path.join(fwd, "O.npy")).astype(np.float32))
    expect("check a forward-only case: O passes", ["check", "02-attention", fwd, o, "--output", "O"], 0, "PASS")
    expect("check a forward-only case: dQ names the missing dO", ["check", "02-attention", fwd, o, "--output", "dQ"],
           2, "needs input dO", err_one_line=True)


def mla_cases(tmp, rng):
    """03-mla through the contract: the committed case round-trips, user shapes get an oracle, wrong fails."""
    j = os.path.join
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "golden", "03-mla")
    case = j(root, "L_65")
    expect("check 03-mla on a committed case (weights from its model folder)", ["check", "03-mla", case,
           j(case, "u.npy"), "--output", "u"], 0, "PASS")
    # The committed inputs and weights as a user would write them: the oracle must give the golden's bytes.
    mine = j(tmp, "mla_in")
    os.makedirs(mine)
    for d in (case, j(root, "model_small")):
        for f in os.listdir(d):
            if f.endswith(".npy") and f not in ("u.npy", "scores.npy", "lse.npy"):
                np.save(j(mine, f), np.load(j(d, f)))
    expect("oracle 03-mla on the committed inputs", ["oracle", "03-mla", "--inputs", mine, "--out", j(tmp, "mla_o")],
           0, "wrote")
    for out in ("u", "scores", "lse"):
        a, b = np.load(j(tmp, "mla_o", out + ".npy")), np.load(j(case, out + ".npy"))
        same = a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
        verdict(f"oracle 03-mla {out} is the committed golden, byte for byte", same)
    # User shapes: H = 3, nope 5, rope 4, v 6, kv_lora 7, q_lora 9, hidden 11; two sequences (1 and 70
    # tokens, block size 16) over a shuffled block table.
    H, nope, rope, v, kvl, ql, hid, bs = 3, 5, 4, 6, 7, 9, 11, 16
    u = j(tmp, "mla_u")
    os.makedirs(u)

    def w(name, *shape):
        np.save(j(u, name + ".npy"), (rng.standard_normal(shape) / np.sqrt(shape[-1])).astype(np.float32))
    w("W_DQ", ql, hid), w("W_UQ", H * nope, ql), w("W_QR", H * rope, ql), w("W_DKV", kvl + rope, hid)
    w("kv_b", H * (nope + v), kvl), w("W_O", hid, H * v)
    np.save(j(u, "q_norm.npy"), rng.uniform(0.5, 1.5, ql).astype(np.float32))
    np.save(j(u, "kv_norm.npy"), rng.uniform(0.5, 1.5, kvl).astype(np.float32))
    np.save(j(u, "h.npy"), rng.standard_normal((2, hid)).astype(np.float32))
    np.save(j(u, "seqlens.npy"), np.array([1, 70], dtype=np.int32))
    np.save(j(u, "q_pos.npy"), np.array([0, 69], dtype=np.int32))
    np.save(j(u, "block_table.npy"), np.array([[5, -1, -1, -1, -1], [0, 3, 1, 4, 2]], dtype=np.int32))
    np.save(j(u, "blocks.npy"), rng.standard_normal((6, bs, kvl + rope)).astype(np.float32))
    expect("oracle 03-mla on user shapes", ["oracle", "03-mla", "--inputs", u, "--out", j(tmp, "mla_uo")], 0, "wrote")
    uo = np.load(j(tmp, "mla_uo", "u.npy"))
    np.save(j(tmp, "mla_u32.npy"), uo.astype(np.float32))
    expect("check 03-mla: the float32 rounding of the oracle passes", ["check", "03-mla", j(tmp, "mla_uo"),
           j(tmp, "mla_u32.npy")], 0, "PASS")
    bad = uo.copy()
    bad[1, 4] += 1e-3 * np.abs(uo).max()
    np.save(j(tmp, "mla_bad.npy"), bad.astype(np.float32))
    expect("check 03-mla: one element off by 1e-3 of the scale fails", ["check", "03-mla", j(tmp, "mla_uo"),
           j(tmp, "mla_bad.npy")], 1, "FAIL")
    expect("check 03-mla: lse given as u is named", ["check", "03-mla", j(tmp, "mla_uo"),
           j(tmp, "mla_uo", "lse.npy")], 2, "--output lse", err_one_line=True)
    # W_DKV and kv_norm form the cache rows, which are an input: no output depends on them, so they may be left out.
    few = j(tmp, "mla_few")
    shutil.copytree(u, few)
    os.remove(j(few, "W_DKV.npy")), os.remove(j(few, "kv_norm.npy"))
    expect("oracle 03-mla without W_DKV, kv_norm", ["oracle", "03-mla", "--inputs", few, "--out", j(tmp, "mla_fo")],
           0, "wrote")
    for out in ("u", "scores", "lse"):
        verdict(f"oracle 03-mla without W_DKV, kv_norm: {out} byte for byte as with them",
                np.load(j(tmp, "mla_fo", out + ".npy")).tobytes() == np.load(j(tmp, "mla_uo", out + ".npy")).tobytes())
    expect("check 03-mla without W_DKV, kv_norm: the float32 rounding passes", ["check", "03-mla", j(tmp, "mla_fo"),
           j(tmp, "mla_u32.npy")], 0, "PASS")
    expect("check 03-mla without W_DKV, kv_norm: one element off fails", ["check", "03-mla", j(tmp, "mla_fo"),
           j(tmp, "mla_bad.npy")], 1, "FAIL")
    # A needed input left out of a case folder (kv_b, and its digest entry): named, with what needs it.
    shutil.copytree(j(tmp, "mla_fo"), j(tmp, "mla_nokvb"))
    os.remove(j(tmp, "mla_nokvb", "kv_b.npy"))
    with open(j(tmp, "mla_nokvb", "case.json")) as f:
        cj = json.load(f)
    cj["files"].remove("kv_b.npy"), cj["digest"].pop("kv_b.npy"), cj["inputs"].remove("kv_b")
    with open(j(tmp, "mla_nokvb", "case.json"), "w") as f:
        json.dump(cj, f)
    expect("check 03-mla: kv_b missing is named with what needs it", ["check", "03-mla", j(tmp, "mla_nokvb"),
           j(tmp, "mla_u32.npy")], 2, "input kv_b is missing; u, scores and lse need it", err_one_line=True)
    os.remove(j(few, "kv_b.npy"))
    expect("oracle 03-mla: kv_b missing is named", ["oracle", "03-mla", "--inputs", few, "--out", j(tmp, "mla_fx")], 2,
           "kv_b.npy is missing", err_one_line=True)
    np.save(j(u, "W_QR.npy"), rng.standard_normal((H * rope + 1, ql)).astype(np.float32))
    expect("oracle 03-mla: W_QR rows not H * rope is named", ["oracle", "03-mla", "--inputs", u, "--out",
           j(tmp, "mla_x")], 2, "W_QR", err_one_line=True)


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
           os.path.join(tmp, "bad.npy")], 1, "exceeds")
    np.save(os.path.join(tmp, "transposed.npy"), np.ascontiguousarray(good.T))
    expect("check: a transposed candidate is bad input", ["check", "01-softmax", case,
           os.path.join(tmp, "transposed.npy")], 2, "shape", err_one_line=True)
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
    oracle_cli_cases(tmp, case, eplb, good)
    gradient_list_cases(tmp)
    device_cases(tmp)
    attention_shape_cases(tmp)
    expect("reproduce 01-softmax --quick writes the table", ["reproduce", "01-softmax", "--quick", "--out",
           os.path.join(tmp, "r")], 0, "paper")
    # One progress line per stage on stderr (`make reproduce` sends the tables to a file): time and peak memory.
    p = checks.run("reproduce", "05-eplb", "--quick", "--out", os.path.join(tmp, "r5"))
    lines = [line for line in p.stderr.splitlines() if line.startswith("reproduce [")]
    verdict("reproduce prints one progress line per stage on stderr", p.returncode == 0 and len(lines) == 1 and
            re.match(r"reproduce \[1/1\] 05-eplb: [0-9.]+ s, peak memory so far [0-9]+ MB$", lines[0]) is not None)
    plan_cases(tmp)

sys.exit(checks.exit_code())

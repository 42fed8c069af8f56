# ladder.describe / oracle / check / golden through the stages' case contracts (the same C++ entry
# points as `ladder describe/oracle/check`): user-made inputs round-trip, wrong candidates fail.
import numpy as np
import pytest

import ladder


def contract_stages():
    return [s for s in ladder.stages() if s in ladder._ladder.contract_stages()]


def test_describe_every_contract():
    stages = ladder._ladder.contract_stages()
    assert "01-softmax" in stages
    for s in stages:
        d = ladder.describe(s)
        assert d["stage"] == s and d["inputs"] and d["outputs"] and s in d["text"]
        for o in d["outputs"]:
            assert o["rule"] in ("max_abs", "elementwise", "exact", "bound")


def test_softmax_oracle_on_my_shape_and_check(rng):
    x = rng.normal(size=(5, 333)).astype(np.float32)
    x[2] = -np.inf  # a fully masked row is all zeros
    want = ladder.oracle("01-softmax", x=x)["y"]
    assert want.dtype == np.float64 and want.shape == x.shape and not want[2].any()
    ok = ladder.check("01-softmax", {"x": x}, ladder.softmax(x, rung="online"))
    assert ok["pass"], ok["text"]
    assert set(ok) == {"pass", "output", "rule", "failed", "metrics", "text"}
    assert "max_abs_err" in ok["metrics"] or ok["metrics"]


@pytest.mark.parametrize("wrong", ["scaled", "nan", "shape", "negative"])
def test_wrong_softmax_candidates_fail(wrong, rng):
    x = rng.normal(size=(4, 100)).astype(np.float32)
    y = ladder.softmax(x)
    if wrong == "scaled":
        y = y * np.float32(1.0001)
    elif wrong == "nan":
        y[1, 7] = np.nan
    elif wrong == "negative":
        y[0, 0] = -y[0, 0]
    if wrong == "shape":  # a candidate of the wrong shape: an error naming the shape, or a failing report
        try:
            r = ladder.check("01-softmax", {"x": x}, y[:, :99].copy())
        except ValueError as e:
            assert "shape" in str(e)
        else:
            assert not r["pass"]
        return
    r = ladder.check("01-softmax", {"x": x}, y)
    assert not r["pass"] and r["failed"], r["text"]


def test_attention_oracle_and_check_every_output(rng):
    def r(*s):
        return rng.normal(size=s).astype(np.float32)
    inp = {"Q": r(1, 2, 17, 11), "K": r(1, 2, 19, 11), "V": r(1, 2, 19, 11), "dO": r(1, 2, 17, 11)}
    want = ladder.oracle("02-attention", causal=True, **inp)
    fwd = ladder.attention(inp["Q"], inp["K"], inp["V"], rung="tiled", causal=True)
    bwd = ladder.attention_backward(inp["Q"], inp["K"], inp["V"], fwd["O"], inp["dO"], fwd["L"], causal=True)
    for name, got in dict(fwd, **bwd).items():
        rep = ladder.check("02-attention", inp, got, output=name, causal=True)
        assert rep["pass"], (name, rep["text"])
        assert want[name].shape == got.shape
    bad = fwd["O"].copy()
    bad[0, 1, 5, 3] += 1e-3
    assert not ladder.check("02-attention", inp, bad, output="O", causal=True)["pass"]


def test_attention_gqa_dv_window_forward_only(rng):
    """GQA (4 query heads on 2 kv heads), d_v = 6 != d = 8, window (2, 0), no dO: a forward-only check."""
    def r(*s):
        return rng.normal(size=s).astype(np.float32)
    inp = {"Q": r(1, 4, 5, 8), "K": r(1, 2, 7, 8), "V": r(1, 2, 7, 6)}
    want = ladder.oracle("02-attention", window_size=[2, 0], **inp)
    assert set(want) == {"O", "L", "m"} and want["O"].shape == (1, 4, 5, 6)
    # Query head h reads kv head h // 2: the same as K, V repeated per query head in that order.
    heads = {"right": [0, 0, 1, 1], "h % H_kv": [0, 1, 0, 1]}
    for name, kv in heads.items():
        mha = dict(inp, K=inp["K"][:, kv].copy(), V=inp["V"][:, kv].copy())
        got = ladder.oracle("02-attention", window_size=[2, 0], **mha)["O"].astype(np.float32)
        rep = ladder.check("02-attention", inp, got, output="O", window_size=[2, 0])
        assert rep["pass"] == (name == "right"), (name, rep["text"])
    off = ladder.oracle("02-attention", window_size=[3, 0], **inp)["O"].astype(np.float32)
    assert not ladder.check("02-attention", inp, off, output="O", window_size=[2, 0])["pass"]
    with pytest.raises(ValueError, match="needs input dO"):
        ladder.check("02-attention", inp, want["O"], output="dQ", window_size=[2, 0])


def test_golden_round_trip_through_check():
    g = ladder.golden("01-softmax", "len_97")
    assert set(g["inputs"]) == {"x"} and set(g["outputs"]) == {"y"}
    cand = ladder.softmax(g["inputs"]["x"], rung="safe")
    assert ladder.check("01-softmax", g, cand)["pass"]
    assert not ladder.check("01-softmax", g, cand * np.float32(0.999))["pass"]


def test_eplb_exact_outputs():
    g = ladder.golden("05-eplb", "readme_hierarchical")
    out = ladder.eplb(g["inputs"]["weight"], "hierarchical", **{k: v for k, v in g["params"].items()
                                                                 if k.startswith("num_")})
    assert ladder.check("05-eplb", g, out["phy2log"], output="phy2log")["pass"]
    swapped = out["phy2log"].copy()
    swapped[0, [0, 1]] = swapped[0, [1, 0]]
    assert not ladder.check("05-eplb", g, swapped, output="phy2log")["pass"]


def test_eplb_valid_rule_reads_companions():
    """rule="valid" judges phy2log with the candidate's logcnt / log2phy, as `ladder check --rule valid`
    reads them beside the candidate: a log2phy that contradicts phy2log fails only when it is given."""
    g = ladder.golden("05-eplb", "readme_hierarchical")
    out = ladder.eplb(g["inputs"]["weight"], "hierarchical", **{k: v for k, v in g["params"].items()
                                                                 if k.startswith("num_")})
    both = {"logcnt": out["logcnt"], "log2phy": out["log2phy"]}
    assert ladder.check("05-eplb", g, out["phy2log"], output="phy2log", rule="valid", companions=both)["pass"]
    bad = out["log2phy"].copy()
    e = int(out["phy2log"][0, 0])
    other = int(np.nonzero(out["phy2log"][0] != e)[0][0])
    bad[0, e, 0] = other  # expert e's first replica named at a slot that holds another expert
    r = ladder.check("05-eplb", g, out["phy2log"], output="phy2log", rule="valid",
                     companions={"logcnt": out["logcnt"], "log2phy": bad})
    assert not r["pass"], r["text"]
    assert ladder.check("05-eplb", g, out["phy2log"], output="phy2log", rule="valid")["pass"]  # not given: not seen
    with pytest.raises(TypeError, match="companions"):
        ladder.check("05-eplb", g, out["phy2log"], output="phy2log", rule="valid", companions=[bad])


def test_device_candidate_gets_ftz_by_default():
    """device=True: FTZ on unless ftz=False, and the report says so (the CLI's --device)."""
    g = ladder.golden("01-softmax", "mixed_scales")
    y = g["outputs"]["y"].astype(np.float32)
    flushed = np.where(np.abs(y) < np.finfo(np.float32).tiny, np.float32(0), y)
    assert (flushed != y).any()
    assert not ladder.check("01-softmax", g, flushed)["pass"]
    r = ladder.check("01-softmax", g, flushed, device=True)
    assert r["pass"], r["text"]
    assert "device candidate: FTZ on" in r["text"]
    assert not ladder.check("01-softmax", g, flushed, device=True, ftz=False)["pass"]
    assert ladder.check("01-softmax", g, flushed, ftz=True)["pass"]


def test_contract_bad_input_named():
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(TypeError, match="z: not an input or parameter of 01-softmax"):
        ladder.oracle("01-softmax", x=x, z=x)
    with pytest.raises(TypeError, match="x: dtype float16"):
        ladder.oracle("01-softmax", x=x.astype(np.float16))
    with pytest.raises(ValueError, match="x: .*C-contiguous"):
        ladder.oracle("01-softmax", x=np.zeros((4, 3), np.float32).T)
    with pytest.raises(ValueError, match="x: shape .* is empty"):
        ladder.oracle("01-softmax", x=np.zeros((0, 3), np.float32))
    with pytest.raises(ValueError, match="01-softmax"):
        ladder.oracle("01-softmax")  # the input x is missing
    with pytest.raises(ValueError, match="nope"):
        ladder.describe("nope")
    with pytest.raises(TypeError, match="case_or_inputs"):
        ladder.check("01-softmax", 3, x)
    with pytest.raises(ValueError, match="CASE_DIR"):
        ladder.check("01-softmax", "/nonexistent/folder", x)

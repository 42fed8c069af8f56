# Inputs an output does not depend on may be left out (issue 38): MoE without a shared expert (s1, s3 [D, 0]
# and s2 [0, D], or the three absent), MLA without W_DKV and kv_norm (they form the cache rows, which are an
# input). Right candidates pass, a wrong one fails, a needed input left out is named with what needs it.
import numpy as np
import pytest

import ladder

SHARED = ("s1", "s3", "s2")


@pytest.fixture(scope="module")
def no_shared():
    return ladder.golden("04-moe", "e8_no_shared")


def test_describe_says_which_inputs_are_optional():
    moe = {t["name"]: t for t in ladder.describe("04-moe")["inputs"]}
    assert all(moe[s]["optional"] and moe[s]["may_be_empty"] for s in SHARED)
    assert "Fs = 0" in moe["s1"]["doc"] and "absent" in moe["s1"]["doc"]
    mla = {t["name"]: t for t in ladder.describe("03-mla")["inputs"]}
    assert [n for n, t in mla.items() if t["optional"]] == ["W_DKV", "kv_norm", "q_lens", "prefix"]


def test_moe_without_shared_expert(no_shared):
    g = no_shared
    assert g["inputs"]["s1"].shape == (97, 0) and g["inputs"]["s2"].shape == (0, 97)
    y = g["outputs"]["y"]
    assert ladder.check("04-moe", g, y.astype(np.float32), output="y")["pass"]
    absent = {k: v for k, v in g["inputs"].items() if k not in SHARED}
    assert ladder.oracle("04-moe", **absent, **g["params"])["y"].tobytes() == y.tobytes()
    assert ladder.check("04-moe", absent, y.astype(np.float32), output="y", **g["params"])["pass"]
    # The model's shared expert added (this layer has none): fails, in both spellings.
    m = ladder.golden("04-moe", "e8_T7")["inputs"]
    x = g["inputs"]["x"].astype(np.float64)
    h = x @ m["s1"].astype(np.float64)
    shared = (h / (1 + np.exp(-h)) * (x @ m["s3"].astype(np.float64))) @ m["s2"].astype(np.float64)
    wrong = (y + shared).astype(np.float32)
    assert not ladder.check("04-moe", g, wrong, output="y")["pass"]
    assert not ladder.check("04-moe", absent, wrong, output="y", **g["params"])["pass"]
    # A layer rung on the case without a shared expert passes.
    out = ladder.moe("dropless", **absent, **g["params"])
    assert ladder.check("04-moe", g, out["y"], output="y")["pass"]
    with pytest.raises(ValueError, match="s1, s3, s2 given yes, no, yes"):
        ladder.oracle("04-moe", **{k: v for k, v in g["inputs"].items() if k != "s3"}, **g["params"])


def test_mla_without_the_cache_side_weights():
    g = ladder.golden("03-mla", "L_63")
    fewer = {k: v for k, v in g["inputs"].items() if k not in ("W_DKV", "kv_norm")}
    want = ladder.oracle("03-mla", **fewer, **g["params"])
    for o in ("u", "scores", "lse"):
        assert want[o].tobytes() == g["outputs"][o].tobytes(), o
    u = g["outputs"]["u"]
    assert ladder.check("03-mla", fewer, u.astype(np.float32), output="u", **g["params"])["pass"]
    bad = u.astype(np.float32)
    bad[0, 3] += np.float32(1e-3 * np.abs(u).max())
    assert not ladder.check("03-mla", fewer, bad, output="u", **g["params"])["pass"]
    case = {"inputs": {k: v for k, v in fewer.items() if k != "kv_b"}, "outputs": g["outputs"],
            "params": g["params"], "manifest": g["manifest"]}
    with pytest.raises(ValueError, match="input kv_b is missing; u, scores and lse need it"):
        ladder.check("03-mla", case, u.astype(np.float32), output="u")

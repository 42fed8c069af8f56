# Stage 07 (low precision) from Python, through the same case contract as `ladder check 07-precision`:
# the reference recipes pass their goldens, a candidate of its own recipe is judged by that recipe's
# derived bound, and wrong candidates (a code off, a row 50 % off, a bf16 result where the recipe
# rounds only in float32) fail.
import json

import numpy as np
import pytest

import ladder


@pytest.mark.parametrize("case_name,rung", [("a8w8_outliers", "a8w8"), ("fp8_blocks", "fp8_block"),
                                            ("fp8_static_saturate", "fp8_block"), ("moe_a8w8", "moe_a8w8"),
                                            ("moe_a8w4_g128", "moe_a8w4")])
def test_recipe_rung_passes_and_wrong_candidates_fail(case_name, rung):
    case = ladder.golden("07-precision", case_name)
    out = ladder._ladder.run("07-precision", "ref", rung, case["inputs"], json.dumps(case["params"]), "float32")
    for name, got in out.items():
        rep = ladder.check("07-precision", case, got, output=name)
        assert rep["pass"], (name, rep["text"])
    xq = out["xq"].copy()
    xq[0, 0] += 1
    assert not ladder.check("07-precision", case, xq, output="xq")["pass"]
    y = out["y"].copy()
    y[1] *= np.float32(1.5)
    rep = ladder.check("07-precision", case, y, output="y")
    assert not rep["pass"] and rep["rule"] == "bound", rep["text"]


def test_a8w8_bf16_result_fails_the_float32_recipe():
    case = ladder.golden("07-precision", "a8w8_outliers")
    y = ladder._ladder.run("07-precision", "ref", "a8w8", case["inputs"], json.dumps(case["params"]), "float32")["y"]
    bf16 = (y.view(np.uint32) + 0x7FFF + ((y.view(np.uint32) >> 16) & 1)) & 0xFFFF0000  # RNE to bf16
    assert not ladder.check("07-precision", case, bf16.view(np.float32), output="y")["pass"]


def test_oracle_of_my_own_recipe(rng):
    x = rng.normal(size=(3, 200)).astype(np.float32)
    w = rng.normal(size=(200, 5)).astype(np.float32)
    want = ladder.oracle("07-precision", x=x, w=w, recipe="fp8_block", acc_bits=24, nc=32)
    assert set(want) == {"xq", "xs", "y"} and want["xs"].shape == (3, 2)
    with pytest.raises(ValueError, match="nc = 48 violates"):
        ladder.oracle("07-precision", x=x, w=w, recipe="fp8_block", nc=48)


def test_moe_a8w4_neighbouring_group_scale_fails():
    # Rung (d) from numpy: the experts' int4 codes rebuilt here, each group dequantised with the next group's
    # scale; the integers are right, the derived bound on y rejects it. The same recipe summed in another
    # order passes.
    case = ladder.golden("07-precision", "moe_a8w4_g128")
    x, w, idx = case["inputs"]["x"], case["inputs"]["w"], case["inputs"]["topk_idx"]
    g, (T, K), N, k = 128, x.shape, w.shape[2], idx.shape[1]
    xs = np.abs(x).max(axis=1, keepdims=True) / np.float32(127)
    xq = np.clip(np.rint(x / xs), -127, 127)
    nb = -(-K // g)
    y_right, y_wrong = np.zeros((T * k, N)), np.zeros((T * k, N))
    for a in range(T * k):
        t, e = divmod(a, k)[0], idx.flat[a]
        sums, scales = [], []
        for b in range(nb):
            wg = w[e, b * g:(b + 1) * g]
            s = (np.abs(wg).max(axis=0) / np.float32(7)).astype(np.float32)
            sums.append(xq[t, b * g:(b + 1) * g] @ np.clip(np.rint(wg / s), -7, 7))
            scales.append(s.astype(np.float64))
        for b in reversed(range(nb)):
            y_right[a] += sums[b] * xs[t, 0] * scales[b]
            y_wrong[a] += sums[b] * xs[t, 0] * scales[(b + 1) % nb]
    assert ladder.check("07-precision", case, y_right, output="y")["pass"]
    assert not ladder.check("07-precision", case, y_wrong, output="y")["pass"]


@pytest.mark.parametrize("case_name,rung,out_name", [("kv_int8_mla", "kv_int8", "u"), ("kv_fp8_mla", "kv_fp8", "u"),
                                                     ("attn_bf16_q5_k113", "attn_bf16", "o")])
def test_attention_rungs_pass_and_a_scaled_row_fails(case_name, rung, out_name):
    # Rungs (e), (f): u / o and lse judged by the bound of ladder/07-precision/attn_bound.hpp.
    case = ladder.golden("07-precision", case_name)
    out = ladder._ladder.run("07-precision", "ref", rung, case["inputs"], json.dumps(case["params"]), "float32")
    for name, got in out.items():
        rep = ladder.check("07-precision", case, got, output=name)
        assert rep["pass"] and rep["rule"] == "bound", (name, rep["text"])
    bad = out[out_name].copy()
    bad[-1] *= np.float32(1.5)
    assert not ladder.check("07-precision", case, bad, output=out_name)["pass"]

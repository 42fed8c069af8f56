# Stage 07 (low precision) from Python, through the same case contract as `ladder check 07-precision`:
# the reference recipes pass their goldens, a candidate of its own recipe is judged by that recipe's
# derived bound, and wrong candidates (a code off, a row 50 % off, a bf16 result where the recipe
# rounds only in float32) fail.
import json

import numpy as np
import pytest

import ladder


@pytest.mark.parametrize("case_name,rung", [("a8w8_outliers", "a8w8"), ("fp8_blocks", "fp8_block"),
                                            ("fp8_static_saturate", "fp8_block")])
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

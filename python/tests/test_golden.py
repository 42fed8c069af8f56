# ladder.golden: the same bytes as the committed data/golden cases (the fp64 oracle is deterministic).
import json
import os

import numpy as np
import pytest

import ladder

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


def test_case_names():
    names = ladder.golden("01-softmax")
    assert "len_97" in names and "overflow" in names


@pytest.mark.parametrize("stage,case", [("01-softmax", "len_97"), ("01-softmax", "all_neg_inf"),
                                        ("02-attention", "q113_k97_d59_causal"), ("05-eplb", "readme_global")])
def test_golden_is_the_oracle_of_its_inputs(stage, case):
    """golden() = the committed case's inputs and the contract's fp64 oracle on them, byte for byte."""
    g = ladder.golden(stage, case)
    folder = os.path.join(ROOT, "data", "golden", stage, case)
    with open(os.path.join(folder, "case.json"), encoding="utf-8") as f:
        assert g["manifest"]["seed"] == json.load(f)["seed"]
    for name, a in g["inputs"].items():  # inputs committed whole are the same bytes
        path = os.path.join(folder, name + ".npy")
        if os.path.exists(path):
            assert np.load(path).tobytes() == a.tobytes(), name
    want = ladder.oracle(stage, **g["inputs"], **g["params"])
    assert set(g["outputs"]) <= set(want)
    for name, a in g["outputs"].items():
        assert a.dtype == want[name].dtype and a.tobytes() == want[name].tobytes(), name


def test_golden_softmax_oracle_is_the_f64_rung():
    g = ladder.golden("01-softmax", "len_1023")
    x, y = g["arrays"]["x"], g["arrays"]["y"]
    assert x.dtype == np.float32 and y.dtype == np.float64
    assert np.array_equal(ladder.softmax(x.astype(np.float64), rung="safe"), y)

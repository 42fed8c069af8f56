# Stages 03 (MLA) and 04 (MoE) from Python: every registered rung, reference and CUDA (SIMT on the CPU),
# run by ladder.mla / ladder.moe on a case's inputs and judged by ladder.check against the fp64 oracle;
# the integer outputs exactly. A wrong candidate built from a rung's own output must fail.
import json

import numpy as np
import pytest

import ladder


def _rung_ids(stage, backend):
    return [r["id"] for r in ladder.rungs(stage, backend)]


MLA = [(b, r) for b in ("ref", "cuda") for r in _rung_ids("03-mla", b)]
MOE = [(b, r) for b in ("ref", "cuda") for r in _rung_ids("04-moe", b)]


@pytest.fixture(scope="module")
def mla_case():
    return ladder.golden("03-mla", "L_65")


@pytest.fixture(scope="module")
def moe_cases():
    return {name: ladder.golden("04-moe", name) for name in ("e16_T7", "e8_dropping_hot")}


def test_both_backends_are_exercised():
    for rungs in (MLA, MOE):
        assert {b for b, _ in rungs} == {"ref", "cuda"}, rungs


@pytest.mark.parametrize("backend,rung", MLA)
def test_mla_rung_passes_the_oracle(mla_case, backend, rung):
    out = ladder.mla(rung, backend=backend, **mla_case["inputs"], **mla_case["params"])
    assert out["u"].dtype == np.float32 and out["u"].shape == mla_case["outputs"]["u"].shape
    rep = ladder.check("03-mla", mla_case, out["u"], output="u")
    assert rep["pass"], rep["text"]
    assert "lse" in out, sorted(out)
    rep = ladder.check("03-mla", mla_case, out["lse"], output="lse")
    assert rep["pass"], rep["text"]


@pytest.mark.parametrize("rung", _rung_ids("03-mla", "ref"))
def test_mla_rung_in_float64(mla_case, rung):
    out = ladder.mla(rung, precision="float64", **mla_case["inputs"], **mla_case["params"])
    assert out["u"].dtype == np.float64
    rep = ladder.check("03-mla", mla_case, out["u"], output="u")
    assert rep["pass"], rep["text"]


def test_mla_wrong_candidate_fails(mla_case):
    u = ladder.mla("flash_mla", **mla_case["inputs"], **mla_case["params"])["u"].copy()
    u[0, 3] += 1e-3 * np.abs(u).max()  # one element off by 0.1 % of the tensor's scale
    rep = ladder.check("03-mla", mla_case, u, output="u")
    assert not rep["pass"], rep["text"]


@pytest.mark.parametrize("backend,rung", MOE)
def test_moe_rung_passes_the_oracle(moe_cases, backend, rung):
    ids = _rung_ids("04-moe", "ref")
    dropping = rung == "dropping"
    case = moe_cases["e8_dropping_hot" if dropping else "e16_T7"]
    params = dict(case["params"])
    out = ladder.moe(rung, backend=backend, **case["inputs"], **params)
    want = case["outputs"]
    assert np.array_equal(out["topk_idx"], want["topk_idx"])
    rep = ladder.check("04-moe", case, out["topk_weight"], output="topk_weight")
    assert rep["pass"], rep["text"]
    if rung == "gate":
        assert "y" not in out and rung in ids
        return
    for name in ("group_sizes", "sort_idx", "kept"):
        if name in out and name in want:
            assert np.array_equal(out[name], want[name]), name
    if rung == "dropless_int8":
        pytest.skip("int8 is judged on int8-exact weights (test_moe_int8_on_exact_weights)")
    rep = ladder.check("04-moe", case, out["y"], output="y")
    assert rep["pass"], rep["text"]


def _int8_exact_layer(rng, T=9, D=16, F=8, E=4, Fs=8):
    """Weights on the grid q * 2^-7 with |q| <= 127 and a +-127 in every output column: per-channel
    int8 quantisation (scale = max|w| / 127 = 2^-7) reproduces them exactly."""
    def grid(*shape):
        q = rng.integers(-127, 128, size=shape)
        q[..., 0, :] = 127  # column maximum 127 in every output channel
        return (q * 2.0 ** -7).astype(np.float32)
    f32 = lambda *s: rng.normal(size=s).astype(np.float32)  # noqa: E731
    inputs = dict(x=f32(T, D), bias=np.zeros(E, np.float32), W_gate=f32(E, D), w1=grid(E, D, F), w3=grid(E, D, F),
                  w2=grid(E, F, D), s1=f32(D, Fs), s3=f32(D, Fs), s2=f32(Fs, D))
    return inputs, dict(top_k=2, n_group=1, topk_group=1, route_scale=1.0)


def test_moe_int8_on_exact_weights(rng):
    inputs, params = _int8_exact_layer(rng)
    y = ladder.moe("dropless_int8", **inputs, **params)["y"]
    rep = ladder.check("04-moe", dict(inputs), y, output="y", **params)
    assert rep["pass"], rep["text"]
    # the same weights moved off the grid by half a quantisation step: int8 no longer matches the oracle
    off = dict(inputs, w2=(inputs["w2"] + np.float32(2.0 ** -9)).astype(np.float32))
    y = ladder.moe("dropless_int8", **off, **params)["y"]
    assert not ladder.check("04-moe", off, y, output="y", **params)["pass"]


def test_moe_ep_sharded_shards_param(moe_cases):
    case = moe_cases["e16_T7"]
    for p in (1, 4, 16):
        out = ladder.moe("ep_sharded", shards=p, **case["inputs"], **case["params"])
        assert ladder.check("04-moe", case, out["y"], output="y")["pass"], p


def test_moe_wrong_candidates_fail(moe_cases):
    case = moe_cases["e16_T7"]
    out = ladder.moe("dropless", **case["inputs"], **case["params"])
    y = out["y"].copy()
    y[2] = 0  # one token's output lost
    assert not ladder.check("04-moe", case, y, output="y")["pass"]
    idx = out["topk_idx"].copy()
    idx[0, [0, 1]] = idx[0, [1, 0]]  # the top-2 in the wrong order
    assert not ladder.check("04-moe", case, idx, output="topk_idx")["pass"]


def test_bad_calls_name_the_argument(moe_cases, mla_case):
    case = moe_cases["e16_T7"]
    with pytest.raises(ValueError, match="precision"):
        ladder.moe("dropless", precision="float16", **case["inputs"], **case["params"])
    with pytest.raises(ValueError, match="float32 only"):
        ladder.moe("dropless", backend="cuda", precision="float64", **case["inputs"], **case["params"])
    with pytest.raises(ValueError, match="rung"):
        ladder.moe("no_such_rung", **case["inputs"], **case["params"])
    bad = dict(case["inputs"], x=case["inputs"]["x"].astype(np.float64))
    with pytest.raises(ValueError, match="input x"):
        ladder.moe("dropless", **bad, **case["params"])
    with pytest.raises(TypeError, match="not an input or parameter"):
        ladder.mla("CD", hidden=1, **mla_case["inputs"])
    missing = {k: v for k, v in mla_case["inputs"].items() if k != "blocks"}
    with pytest.raises(ValueError, match="blocks"):
        ladder.mla("CD", **missing)
    # Every stage's rungs run through its contract: a missing input is named.
    with pytest.raises(ValueError, match="tensor 'x' is missing"):
        ladder._ladder.run("01-softmax", "ref", "online", {}, "{}", "float32")



@pytest.mark.parametrize("stage,case_name,rung,output", [
    ("01-softmax", "len_97", "online", "y"),
    ("01-softmax", "len_1025", "v3_online", "y"),
    ("02-attention", "q97_k113_d32_causal", "tiled", "O"),
    ("02-attention", "q97_k113_d32_causal", "backward_recompute", "dQ"),
    ("05-eplb", "readme_hierarchical", "hierarchical", "phy2log"),
])
def test_contract_run_then_check(stage, case_name, rung, output):
    """Stages whose typed calls predate the contract path run through it too (`ladder run`): the rung's
    output passes the stage's own check of the golden case."""
    case = ladder.golden(stage, case_name)
    backend = "cuda" if rung.startswith("v3") else "ref"
    out = ladder._ladder.run(stage, backend, rung, case["inputs"], json.dumps(case["params"]), "float32")
    report = ladder.check(stage, case, out[output], output=output)
    assert report["pass"], report["text"]

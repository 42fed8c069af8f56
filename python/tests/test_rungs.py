# Every registered rung of the stages the module calls, on numpy arrays, against the fp64 reference
# at the tolerance rule's scale (here a loose bound: the rule itself is tested through ladder.check).
import numpy as np
import pytest

import ladder

EXERCISED = set()


def key(stage, backend, rung):
    return f"{stage}/{backend}/{rung}"


def rung_list(stage):
    return [(r["backend"], r["id"]) for r in ladder.rungs(stage)]


def test_registry_lists_every_stage_and_rung():
    rs = ladder.rungs()
    assert rs, "the registry is empty"
    for r in rs:
        assert set(r) == {"stage", "id", "backend", "name", "doc", "cost_doc"}
        assert r["stage"] in ladder.stages()
    assert {"naive", "safe", "online"} <= {r["id"] for r in ladder.rungs("01-softmax", "ref")}


@pytest.mark.parametrize("backend,rung", rung_list("01-softmax"))
def test_softmax_rung(backend, rung, rng):
    x = rng.normal(size=(7, 97)).astype(np.float32)
    want = ladder.softmax(x.astype(np.float64), rung="safe")
    y = ladder.run("01-softmax", rung, backend, x=x)["y"]
    assert y.dtype == np.float32 and y.shape == x.shape
    assert np.max(np.abs(y - want)) < 1e-6
    if backend == "ref":  # the f64 function too
        y64 = ladder.softmax(x.astype(np.float64), rung=rung)
        assert y64.dtype == np.float64 and np.max(np.abs(y64 - want)) < 1e-14
    EXERCISED.add(key("01-softmax", backend, rung))


def attention_inputs(rng, dtype, B=2, H=3, Nq=13, Nk=17, d=11):
    def r(*s):
        return rng.normal(size=s).astype(dtype)
    return r(B, H, Nq, d), r(B, H, Nk, d), r(B, H, Nk, d), r(B, H, Nq, d)


def attention_numpy(q, k, v, causal):
    """Plain numpy attention in float64 with the bottom-right causal rule (an independent oracle)."""
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    Nq, Nk, d = q.shape[2], k.shape[2], q.shape[3]
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(d)
    if causal:
        i, j = np.arange(Nq)[:, None], np.arange(Nk)[None, :]
        s = np.where(j <= i + Nk - Nq, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    p = np.exp(s - m)
    return (p / p.sum(axis=-1, keepdims=True)) @ v


@pytest.mark.parametrize("backend,rung", rung_list("02-attention"))
@pytest.mark.parametrize("causal", [False, True])
def test_attention_rung(backend, rung, causal, rng):
    q, k, v, do = attention_inputs(rng, np.float32)
    if rung.startswith("backward"):
        fwd = ladder.attention(q, k, v, rung="naive", causal=causal)
        want = ladder.attention_backward(*(a.astype(np.float64) for a in (q, k, v, fwd["O"], do, fwd["L"])),
                                         rung="backward_naive", causal=causal)
        # run: the contract's backward recomputes O and L (the naive forward at the rung's precision: fwd above)
        got = ladder.run("02-attention", rung, backend, Q=q, K=k, V=v, dO=do, causal=causal)
        for name in ("dQ", "dK", "dV", "D"):
            assert got[name].dtype == np.float32
            assert np.max(np.abs(got[name] - want[name])) < 1e-4, name
    else:
        got = ladder.run("02-attention", rung, backend, Q=q, K=k, V=v, causal=causal)
        assert got["O"].shape == q.shape and got["L"].shape == q.shape[:3]
        assert np.max(np.abs(got["O"] - attention_numpy(q, k, v, causal))) < 1e-5
    EXERCISED.add(key("02-attention", backend, rung))


@pytest.mark.parametrize("backend,rung", rung_list("05-eplb"))
def test_eplb_rung(backend, rung):
    # The README's example: 2 layers, 12 experts, 16 replicas, 4 groups, 2 nodes, 8 GPUs.
    w = np.array([[90, 132, 40, 61, 104, 165, 39, 4, 73, 56, 183, 86],
                  [20, 107, 104, 64, 19, 197, 187, 157, 172, 86, 16, 27]], dtype=np.float64)
    out = ladder.run("05-eplb", rung, backend, weight=w, num_replicas=16, num_groups=4, num_nodes=2, num_gpus=8,
                     num_packs=4)
    assert out and all(a.dtype == np.int64 for a in out.values())
    if "phy2log" in out:
        phy2log = out["phy2log"]
        assert phy2log.shape == (2, 16)
        for layer in range(2):  # every logical expert has at least one replica
            assert set(phy2log[layer]) == set(range(12))
    else:  # balanced packing: 4 packs of 3 experts each
        assert out["pack_index"].shape == (2, 12)
        assert all(np.bincount(row, minlength=4).tolist() == [3] * 4 for row in out["pack_index"])
    EXERCISED.add(key("05-eplb", backend, rung))


def test_eplb_matches_readme_hierarchical_example():
    w = np.array([[90, 132, 40, 61, 104, 165, 39, 4, 73, 56, 183, 86],
                  [20, 107, 104, 64, 19, 197, 187, 157, 172, 86, 16, 27]], dtype=np.float64)
    out = ladder.eplb(w, "hierarchical", num_replicas=16, num_groups=4, num_nodes=2, num_gpus=8)
    # deepseek-ai/EPLB README, the hierarchical example's phy2log
    assert out["phy2log"].tolist() == [[5, 6, 5, 7, 8, 4, 3, 4, 10, 9, 10, 2, 0, 1, 11, 1],
                                       [7, 10, 6, 8, 6, 11, 8, 9, 2, 4, 5, 1, 5, 0, 3, 1]]


def test_zero_copy_input_and_fresh_output(rng):
    x = rng.normal(size=(3, 8)).astype(np.float32)
    y = ladder.softmax(x)
    assert y.flags["C_CONTIGUOUS"] and y.flags["OWNDATA"] and not np.shares_memory(x, y)
    x0 = x.copy()
    ladder.softmax(x)
    assert np.array_equal(x, x0)  # the input is read in place, never written


def test_cost_from_the_registry():
    c = ladder.cost("01-softmax", "online", [4, 1000])
    assert c["bytes_read"] == 2 * 4 * 1000 * 4 and c["bytes_written"] == 4 * 1000 * 4


def test_every_rung_of_the_called_stages_was_exercised():
    """Runs last in this file: every registered rung of the stages ladder.run serves was called."""
    callable_stages = {"01-softmax", "02-attention", "05-eplb"}
    missing = [key(r["stage"], r["backend"], r["id"]) for r in ladder.rungs()
               if r["stage"] in callable_stages and key(r["stage"], r["backend"], r["id"]) not in EXERCISED]
    assert not missing, f"registered rungs never called from Python: {missing}"


def test_float64_inputs_run_unrounded(rng):
    # A float64 caller's data reaches the rung's float64 function as given (TensorSpec::f64_at_run): rounded to
    # float32 on the way, these would differ from numpy by ~1e-8, not 1e-15.
    x = rng.normal(size=(3, 50)) * 3
    e = np.exp(x - x.max(axis=1, keepdims=True))
    assert np.max(np.abs(ladder.softmax(x, rung="safe") - e / e.sum(axis=1, keepdims=True))) < 1e-15
    q, k, v = (rng.normal(size=s) for s in ((1, 2, 5, 8), (1, 2, 7, 8), (1, 2, 7, 8)))
    o = ladder.attention(q, k, v, rung="naive", causal=True)["O"]
    assert o.dtype == np.float64 and np.max(np.abs(o - attention_numpy(q, k, v, True))) < 1e-14
    with pytest.raises(ValueError, match="input x has dtype <f8, violates <f4 at precision float32"):
        ladder.run("01-softmax", "safe", x=x, precision="float32")

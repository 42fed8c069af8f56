# Bad input from Python: TypeError (type, dtype) or ValueError (shape, layout, empty, NaN, a violated
# constraint), each naming the argument -- never a crash. Every case here was first seen to raise.
import numpy as np
import pytest

import ladder

X = np.zeros((2, 5), dtype=np.float32)


@pytest.mark.parametrize("bad,exc,words", [
    ([[1.0, 2.0]], TypeError, ["x", "numpy.ndarray", "list"]),
    (np.zeros((2, 5), dtype=np.int32), TypeError, ["x", "int32", "float32 or float64"]),
    (np.zeros((2, 5), dtype=np.float16), TypeError, ["x", "float16"]),
    (np.zeros((2, 0), dtype=np.float32), ValueError, ["x", "empty"]),
    (np.zeros((0, 5), dtype=np.float32), ValueError, ["x", "empty"]),
    (np.array(1.0, dtype=np.float32), ValueError, ["x", "0-d"]),
    (np.float32(1.0), TypeError, ["x", "numpy.ndarray", "float32"]),
    (np.zeros((5, 4), dtype=np.float32).T, ValueError, ["x", "C-contiguous", "ascontiguousarray"]),
    (np.zeros((4, 10), dtype=np.float32)[:, ::2], ValueError, ["x", "C-contiguous"]),
    (np.zeros((2, 5), dtype=">f4"), TypeError, ["x", ">f4"]),
])
def test_softmax_bad_x(bad, exc, words):
    with pytest.raises(exc) as e:
        ladder.softmax(bad)
    for w in words:
        assert w in str(e.value), (w, str(e.value))


def test_unknown_stage_rung_backend():
    with pytest.raises(ValueError, match="rung: 'fast' is not a ref rung of 01-softmax"):
        ladder.softmax(X, rung="fast")
    with pytest.raises(ValueError, match="backend: 'gpu'"):
        ladder.softmax(X, backend="gpu")
    with pytest.raises(ValueError, match="stage: '07-nope'"):
        ladder.run("07-nope", "x")


def test_cuda_rung_is_float32_only():
    with pytest.raises(ValueError, match="rung 01-softmax/cuda/v3_online has no float64 function"):
        ladder.softmax(X.astype(np.float64), rung="v3_online", backend="cuda")


def test_attention_bad_shapes_and_dtypes():
    q = np.zeros((1, 2, 3, 4), np.float32)
    k = np.zeros((1, 2, 5, 4), np.float32)
    with pytest.raises(ValueError, match=r"K.shape = \[1, 2, 5, 3\] violates K.shape == \[B, H_kv, Nk, d\]"):
        ladder.attention(q, np.zeros((1, 2, 5, 3), np.float32), k)
    with pytest.raises(ValueError, match=r"V.shape = \[1, 2, 6, 4\] violates V.shape == \[B, H_kv, Nk, d_v\]"):
        ladder.attention(q, k, np.zeros((1, 2, 6, 4), np.float32))
    with pytest.raises(ValueError, match="input K has dtype <f8, violates <f4 at precision float32"):
        ladder.attention(q, k.astype(np.float64), k)
    with pytest.raises(ValueError, match=r"Q.shape = \[2, 3, 4\] violates rank 4"):
        ladder.attention(q[0], k, k)
    with pytest.raises(ValueError, match="scale: .* violates scale finite"):
        ladder.attention(q, k, k, scale=float("nan"))
    with pytest.raises(ValueError, match="is a backward rung"):
        ladder.attention(q, k, k, rung="backward_recompute")
    with pytest.raises(ValueError, match="L: shape .* violates shape == \\[1, 2, 3\\]"):
        ladder.attention_backward(q, k, k, q, q, np.zeros((1, 2, 4), np.float32))


def test_eplb_constraints_named():
    w = np.ones((2, 12))
    with pytest.raises(ValueError, match="num_replicas = 5 violates num_replicas >= experts = 12"):
        ladder.eplb(w, "global", num_replicas=5, num_gpus=8)
    with pytest.raises(ValueError, match="num_replicas = 20 violates num_replicas % num_gpus == 0"):
        ladder.eplb(w, "global", num_replicas=20, num_gpus=8)
    with pytest.raises(ValueError, match="num_gpus = 0 violates num_gpus >= 1"):
        ladder.eplb(w, "global", num_replicas=16, num_gpus=0)
    with pytest.raises(ValueError, match="weight"):
        ladder.eplb(np.full((2, 12), np.nan), "global", num_replicas=16, num_gpus=8)
    with pytest.raises(ValueError, match=r"input weight has shape \[12\], violates rank 2"):
        ladder.eplb(np.ones(12), "global", num_replicas=16, num_gpus=8)


def test_golden_bad_arguments():
    with pytest.raises(ValueError, match="case: 'nope' is not a case of 01-softmax"):
        ladder.golden("01-softmax", "nope")
    with pytest.raises(ValueError, match="stage: '09-x' has no golden cases"):
        ladder.golden("09-x")
    with pytest.raises(TypeError, match="case: expected a case name"):
        ladder.golden("01-softmax", 3)

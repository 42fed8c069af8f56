# examples/pytest/test_my_kernels.py -- how another project checks ITS kernels against ladder.
# Run: PYTHONPATH=<ladder build>/python /usr/bin/python3 -m pytest examples/pytest
# Each check is five lines: make inputs, run your kernel, ask ladder to judge, assert.
import numpy as np

import ladder


def my_softmax(x):  # your kernel (here numpy, float32 in -> float32 out)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def my_attention(Q, K, V):  # your kernel: plain attention in float32
    s = Q @ np.swapaxes(K, -1, -2) / np.float32(np.sqrt(Q.shape[-1]))
    return my_softmax(s) @ V


def test_my_softmax():
    x = np.random.default_rng(0).normal(size=(64, 1000)).astype(np.float32)
    report = ladder.check("01-softmax", {"x": x}, my_softmax(x))
    assert report["pass"], report["text"]


def test_my_attention():
    Q, K, V, dO = (np.random.default_rng(i).normal(size=(2, 4, 113, 59)).astype(np.float32) for i in range(4))
    report = ladder.check("02-attention", {"Q": Q, "K": K, "V": V, "dO": dO}, my_attention(Q, K, V), output="O")
    assert report["pass"], report["text"]


def test_a_broken_kernel_is_caught():
    x = np.random.default_rng(1).normal(size=(8, 300)).astype(np.float32)
    wrong = my_softmax(x) * np.float32(1.001)  # 0.1% off everywhere
    assert not ladder.check("01-softmax", {"x": x}, wrong)["pass"]

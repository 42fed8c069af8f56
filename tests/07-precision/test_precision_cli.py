#!/usr/bin/python3
"""`ladder describe / check / reproduce 07-precision` end to end: exit 0 pass, 1 fail, 2 bad input in one line.

    test_precision_cli.py path/to/ladder path/to/data/golden/07-precision
Candidates are made with numpy from the committed expected outputs, as another project would.
"""
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: cli_expect
from cli_expect import Checks  # noqa: E402

LADDER, GOLDEN = sys.argv[1], sys.argv[2]
checks = Checks(LADDER)
expect = checks.expect


with tempfile.TemporaryDirectory() as tmp:
    j = os.path.join
    expect("list names the stage", ["list"], 0, "07-precision")
    expect("describe names the bound rule", ["describe", "07-precision"], 0, "rule bound")
    for case in ["a8w8_outliers", "fp8_blocks", "moe_a8w4_g128"]:
        d = j(GOLDEN, case)
        y = np.load(j(d, "y.npy"))
        good = j(tmp, f"{case}_good.npy")
        np.save(good, y.astype(np.float32))
        expect(f"{case}: the oracle rounded to float32 passes", ["check", "07-precision", d, good, "--output", "y"], 0,
               "PASS (bound rule)")
        bad = y.astype(np.float32)
        bad[1] *= np.float32(1.02)  # one token's outputs 2 % off (a neighbouring tile's scale would be worse)
        badp = j(tmp, f"{case}_bad.npy")
        np.save(badp, bad)
        expect(f"{case}: one token 2 % off fails", ["check", "07-precision", d, badp, "--output", "y"], 1, "FAIL")
        xq = np.load(j(d, "xq.npy"))
        xq_bad = xq.copy()
        xq_bad[0, 0] += 1
        xp = j(tmp, f"{case}_xq.npy")
        np.save(xp, xq_bad)
        expect(f"{case}: one code off fails", ["check", "07-precision", d, xp, "--output", "xq"], 1, "FAIL")
    expect("acc of an fp8 case: one-line error", ["check", "07-precision", j(GOLDEN, "fp8_blocks"),
           j(GOLDEN, "fp8_blocks", "y.npy"), "--output", "acc"], 2, "acc", err_one_line=True)
    expect("reproduce prints the curve", ["reproduce", "07-precision", "--quick", "--out", tmp], 0, "promoted")
    expect("reproduce prints SmoothQuant's table", ["reproduce", "07-precision", "--quick", "--out", tmp], 0,
           "smoothed per-token")
    # FlashMLA states 656 bytes per token; the reproduce derives it from V3's kv_lora and rope dims.
    expect("reproduce measures rung (d)'s errors beside their bounds", ["reproduce", "07-precision", "--quick", "--out",
           tmp], 0, "| moe_a8w4 |")
    expect("reproduce derives FlashMLA's 656-byte FP8 record", ["reproduce", "07-precision", "--quick", "--out", tmp],
           0, "bf16 RoPE) | 656 |")

    # Rung (e): the int8 KV cache recomputed in numpy (RNE: np.rint; scale amax/127 in float32), attention in float64.
    def kv_int8_u(d, neighbour):
        qa, qr, kv = np.load(j(d, "q_abs.npy")), np.load(j(d, "q_pe.npy")), np.load(j(d, "kv.npy"))
        L, wo = np.load(j(d, "seqlens.npy")), np.load(j(d, "w_o.npy")).astype(np.float64)
        R, sigma = qa.shape[2], np.float64(np.float32(1 / np.sqrt(192.0)))
        u = np.zeros((qa.shape[0], wo.shape[0]))
        for b in range(qa.shape[0]):
            rows = kv[b, :L[b]]
            s = np.abs(rows).max(axis=1) / np.float32(127)
            codes = np.rint(rows / s[:, None])
            if neighbour and L[b] > 1:  # token j dequantised with token j+1's scale (the last with j-1's)
                s = np.array([s[jj + 1] if jj + 1 < L[b] else s[jj - 1] for jj in range(L[b])], dtype=np.float32)
            deq = codes.astype(np.float64) * s[:, None].astype(np.float64)
            q = np.concatenate([qa[b], qr[b]], axis=1).astype(np.float64)
            sc = sigma * q @ deq.T
            a = np.exp(sc - sc.max(axis=1, keepdims=True))
            a /= a.sum(axis=1, keepdims=True)
            u[b] = wo @ (a @ deq[:, :R]).reshape(-1)
        return u

    d = j(GOLDEN, "kv_int8_mla")
    for neighbour, rc in [(False, 0), (True, 1)]:
        path = j(tmp, f"kv_int8_u_{neighbour}.npy")
        np.save(path, kv_int8_u(d, neighbour))
        expect(f"kv_int8_mla: u {'with the neighbour token scale fails' if neighbour else 'recomputed in numpy passes'}",
               ["check", "07-precision", d, path, "--output", "u"], rc, "FAIL" if rc else "PASS (bound rule)")

    # Rung (f): the recipe in numpy, float32, P rounded to bf16 by RNE (declared) or truncation (wrong).
    def bf16(x, rtz=False):
        b = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
        b = b if rtz else b + 0x7FFF + ((b >> 16) & 1)
        return (b & 0xFFFF0000).astype(np.uint32).view(np.float32)

    def attn_o(d, rtz):
        q, k, v = (bf16(np.load(j(d, f"{n}.npy"))) for n in "qkv")
        o = np.zeros((q.shape[0], v.shape[1]), dtype=np.float32)
        for i in range(q.shape[0]):
            m, l, acc = np.float32(-np.inf), np.float32(0), np.zeros(v.shape[1], dtype=np.float32)
            for j0 in range(0, k.shape[0], 64):
                S = (k[j0:j0 + 64] @ q[i]).astype(np.float32) * np.float32(1.0)  # the case's softmax_scale is 1
                mt = max(m, S.max())
                alpha = np.float32(0) if m == -np.inf else np.exp(np.float32(m - mt))
                P = np.exp((S - mt).astype(np.float32))
                l = alpha * l + P.sum(dtype=np.float32)
                acc = alpha * acc + (bf16(P, rtz)[:, None] * v[j0:j0 + 64]).sum(axis=0, dtype=np.float32)
                m = mt
            o[i] = acc / l
        return o

    d = j(GOLDEN, "attn_bf16_ptrunc")
    for rtz, rc in [(False, 0), (True, 1)]:
        path = j(tmp, f"attn_o_{rtz}.npy")
        np.save(path, attn_o(d, rtz))
        expect(f"attn_bf16_ptrunc: P {'truncated fails' if rtz else 'rounded to nearest even passes'}",
               ["check", "07-precision", d, path, "--output", "o"], rc, "FAIL" if rc else "PASS (bound rule)")
    expect("reproduce prints rung (f)'s table over L", ["reproduce", "07-precision", "--quick", "--out", tmp], 0,
           "bf16 tiled attention, float32 accumulation")
    # The CUDA rung (stage 02's tiled_bf16 under SIMT): listed, run on each case, its o and lse pass the judge.
    expect("list names the CUDA attn_bf16 rung", ["list"], 0, "07-precision cuda     attn_bf16")
    for case in ["attn_bf16_k1024", "attn_bf16_ptrunc", "attn_bf16_q5_k113"]:
        d, out = j(GOLDEN, case), j(tmp, f"cuda_{case}")
        expect(f"{case}: ladder run --backend cuda attn_bf16", ["run", "07-precision", "attn_bf16", "--backend", "cuda",
                                                                "--case", d, "--out", out], 0, "")
        expect(f"{case}: the CUDA rung's o and lse pass", ["check", "07-precision", d, out, "--output", "o,lse"], 0,
               "PASS (bound rule)")

    # The bf16_gemm recipe: codes by numpy's RNE (bf16() above), y from them in float32 (numpy's own order and
    # blocking) passes; x w in float32 from the unrounded inputs, or the codes truncated, fails. Both rungs run.
    expect("list names the CUDA bf16_gemm rung", ["list"], 0, "07-precision cuda     bf16_gemm")
    for case in ["bf16_mla_o_proj", "bf16_k203", "bf16_scales", "bf16_zeros_ties"]:
        d = j(GOLDEN, case)
        x, w = np.load(j(d, "x.npy")), np.load(j(d, "w.npy"))
        for name, arr, rc in [("y from the RNE codes in float32 passes", bf16(x) @ bf16(w), 0),
                              ("y in float32 from the unrounded x, w fails", x @ w, 1),
                              ("y from truncated codes fails", bf16(x, True) @ bf16(w, True), 1)]:
            path = j(tmp, f"{case}_y_{rc}_{len(name)}.npy")
            np.save(path, arr.astype(np.float32))
            expect(f"{case}: {name}", ["check", "07-precision", d, path, "--output", "y"], rc,
                   "FAIL" if rc else "PASS (bound rule)")
        xq = (bf16(x, True).view(np.uint32) >> 16).astype(np.int32)
        path = j(tmp, f"{case}_xq_rtz.npy")
        np.save(path, xq)
        expect(f"{case}: xq truncated (RTZ) fails", ["check", "07-precision", d, path, "--output", "xq"], 1, "FAIL")
        for backend in ["ref", "cuda"]:
            out = j(tmp, f"{backend}_{case}")
            expect(f"{case}: ladder run --backend {backend} bf16_gemm",
                   ["run", "07-precision", "bf16_gemm", "--backend", backend, "--case", d, "--out", out], 0, "")
            expect(f"{case}: the {backend} rung's xq, wq, y pass", ["check", "07-precision", d, out, "--output",
                                                                      "xq,wq,y"], 0, "PASS")
sys.exit(checks.exit_code())

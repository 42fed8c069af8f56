"""scripts/gpu-torch-peers.py [--json FILE] [--reps N] -- PyTorch on the same GPU, at bench_gpu's shapes, as a peer
for the CUDA rungs (scripts/gpu-check runs it when python3 has torch with CUDA; it is not part of the build).

Timed like bench_gpu: CUDA events around each call, median of N calls (default 10) after 2 warm-ups, random
non-zero fp32 inputs, TF32 off (true fp32, as the rungs compute). Rows:
  softmax       torch.softmax over rows, 16384 x 4096 fp32
  attention     scaled_dot_product_attention, B=8 H=1 N=4096 d=128 fp32, the memory-efficient backend
                (FlashAttention's backend takes no fp32), forward, and forward + backward minus forward
  attention bf16  scaled_dot_product_attention, the same shape in bf16, FlashAttention's backend (the peer of the
                tensor-core forward, tiled_bf16), forward only, causal and not
  MLA step      DeepSeek-V2, B=64 L=4096 fp32, the absorbed step as einsums (A_CC_ME's arithmetic: W_DQ,
                RMSNorm, W_UQ/W_QR, W_UK absorbed into q, scores on the latent cache and the rope keys,
                softmax, a c^KV, W_UV, W_O); RoPE's rotation is left out (elementwise on B x H x 64 numbers).
Exit 3 when torch or a CUDA device is missing."""
import argparse
import json
import math
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--reps", type=int, default=10)
    args = ap.parse_args()
    try:
        import torch
        import torch.nn.functional as F
    except ImportError as e:
        print(f"gpu-torch-peers: no torch: {e}")
        return 3
    if not torch.cuda.is_available():
        print("gpu-torch-peers: torch sees no CUDA device")
        return 3
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(1)

    def rand(*shape, lo=0.1, hi=1.0):
        return torch.rand(*shape, device=dev, generator=gen) * (hi - lo) + lo

    def time_ms(f):
        for _ in range(2):
            f()
        torch.cuda.synchronize()
        ts = []
        for _ in range(max(1, args.reps)):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            f()
            b.record()
            torch.cuda.synchronize()
            ts.append(a.elapsed_time(b))
        ts.sort()
        return ts[len(ts) // 2]

    rows = []
    # softmax
    x = rand(16384, 4096, lo=0.1, hi=4.0)
    rows.append({"peer": "torch.softmax", "shape": "16384x4096 fp32", "ms": time_ms(lambda: torch.softmax(x, -1))})
    del x
    # attention
    from torch.nn.attention import SDPBackend, sdpa_kernel
    q, k, v = (rand(8, 1, 4096, 128) for _ in range(3))
    with sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION):
        fwd = time_ms(lambda: F.scaled_dot_product_attention(q, k, v))
        qg, kg, vg = (t.clone().requires_grad_(True) for t in (q, k, v))
        dO = rand(8, 1, 4096, 128)

        def fwd_bwd():
            o = F.scaled_dot_product_attention(qg, kg, vg)
            o.backward(dO)

        both = time_ms(fwd_bwd)
    rows.append({"peer": "SDPA mem-efficient fwd", "shape": "B8 H1 N4096 d128 fp32", "ms": fwd})
    rows.append({"peer": "SDPA mem-efficient bwd (fwd+bwd - fwd)", "shape": "B8 H1 N4096 d128 fp32",
                 "ms": both - fwd})
    del q, k, v, qg, kg, vg, dO
    # attention in bf16 on FlashAttention's backend: the peer of tiled_bf16 (issue 42)
    q, k, v = (rand(8, 1, 4096, 128).to(torch.bfloat16) for _ in range(3))
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        for causal in (False, True):
            ms = time_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
            rows.append({"peer": "SDPA flash fwd bf16" + (" causal" if causal else ""),
                         "shape": "B8 H1 N4096 d128 bf16" + (" causal" if causal else ""), "ms": ms})
    del q, k, v
    # MLA step, DeepSeek-V2 (hidden 5120, 128 heads, q_lora 1536, kv_lora 512, nope 128, rope 64, v 128)
    B, L, H, hid, ql, R, nope, rope, vh = 64, 4096, 128, 5120, 1536, 512, 128, 64, 128

    def w(o, i):
        s = 1 / math.sqrt(i)
        return rand(o, i, lo=0.1 * s, hi=s)

    W_DQ, W_UQ, W_QR, W_O = w(ql, hid), w(H * nope, ql), w(H * rope, ql), w(hid, H * vh)
    kv_b = w(H * (nope + vh), R).view(H, nope + vh, R)
    W_UK, W_UV = kv_b[:, :nope, :], kv_b[:, nope:, :]
    q_norm = rand(ql, lo=0.5, hi=1.5)
    h = rand(B, hid)
    cache = rand(B, L, R + rope)
    ckv, kpe = cache[:, :, :R], cache[:, :, R:]
    scale = 1 / math.sqrt(nope + rope)

    def mla_step():
        cq = h @ W_DQ.T
        cq = cq * torch.rsqrt(cq.pow(2).mean(-1, keepdim=True) + 1e-6) * q_norm
        qn = (cq @ W_UQ.T).view(B, H, nope)
        qr = (cq @ W_QR.T).view(B, H, rope)
        q_abs = torch.einsum("bhn,hnr->bhr", qn, W_UK)
        s = torch.einsum("bhr,blr->bhl", q_abs, ckv) + torch.einsum("bhp,blp->bhl", qr, kpe)
        a = torch.softmax(s * scale, -1)
        o_lat = torch.einsum("bhl,blr->bhr", a, ckv)
        o = torch.einsum("bhr,hvr->bhv", o_lat, W_UV)
        return o.reshape(B, H * vh) @ W_O.T

    rows.append({"peer": "torch einsum MLA absorbed step", "shape": "DeepSeek-V2 B64 L4096 fp32", "ms": time_ms(mla_step)})

    name = torch.cuda.get_device_name(0)
    print(f"# PyTorch {torch.__version__} on {name}, median of {args.reps} calls after 2 warm-ups, TF32 off")
    print("| peer | shape | ms |\n|---|---|---|")
    for r in rows:
        print(f"| {r['peer']} | {r['shape']} | {r['ms']:.3f} |")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"torch": torch.__version__, "device": name, "reps": args.reps, "rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())

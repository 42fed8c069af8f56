#!/usr/bin/python3
"""Chapter 03 figure: KV-cache bytes per sequence and per layer vs context length L, per variant.

The dimensions come from data/models/deepseek-v2.json (the file tests/03-mla/test_mla_model.cpp checks
against ladder::mla::deepseek_v2()); the bytes per token are the cache terms of ladder's Cost
formulas (ref/include/ladder/03-mla/cost.hpp), in bf16: CD caches K and V per head, H (nope + rope + v)
elements per token; CC, A_CC, A_CC_ME, AM and flash_mla cache one compressed row, kv_lora + rope.
The script checks the two per-token numbers against the chapter's table (81,920 and 1,152 bytes).
Usage: ch03_mla.py OUT_DIR (make figures)."""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main(out_dir):
    a = json.load(open(os.path.join(ROOT, "data", "models", "deepseek-v2.json")))["attention"]
    v = {k: a[k]["value"] for k in ("num_attention_heads", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
                                    "v_head_dim")}
    H, R, nope, rope, vh = (v["num_attention_heads"], v["kv_lora_rank"], v["qk_nope_head_dim"],
                            v["qk_rope_head_dim"], v["v_head_dim"])
    cd, cc = 2 * H * (nope + rope + vh), 2 * (R + rope)
    if (cd, cc) != (81920, 1152):
        sys.exit(f"ch03_mla.py: bytes per token {cd}, {cc} differ from the chapter's table (81920, 1152)")
    L = [2 ** k for k in range(0, 18)]
    fig, ax = plt.subplots(figsize=(8, 5))
    ax.plot(L, [cd * n for n in L], "o-", label=f"CD: K and V per head, {cd:,} B/token")
    ax.plot(L, [cc * n for n in L], "s-", label=f"CC, A_CC, A_CC_ME, AM, flash_mla: c^KV and k^R, {cc:,} B/token")
    ax.axhline(80e9 / 60, color="grey", lw=0.8, ls="--")
    ax.text(1.2, 80e9 / 60 * 1.3, "80 GB shared by 60 layers", color="grey", fontsize=8)
    ax.set(xscale="log", yscale="log", xlabel="context length L (tokens)", ylabel="cache bytes per sequence, one layer (bf16)",
           title=f"DeepSeek-V2 MLA: the compressed cache is {cd / cc:.1f}x smaller at every L")
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "cache_bytes.png"), dpi=110)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "chapters", "03-mla", "figures"))

#!/usr/bin/python3
"""Stage 03 in FlashMLA's interface through the `ladder` binary and Python: `ladder flashmla write` writes a case
in FlashMLA's layouts (s_q = 2, causal), the flash_mla rung's o, lse (`ladder flashmla flash`, two split sizes)
pass `ladder check 03-mla/flashmla` (exit 0, FlashMLA's cos_diff printed beside the verdict); mutants fail (exit
1): lse in log2, o written [h_q, s_q] into the [s_q, h_q] buffer, the causal flag ignored. The FP8 "with scale"
cache (`write --kv-fp8`: uint8 [num_blocks, 64, 1, 656]) and sparse decode (`--topk`) the same, with the planted
bugs of `flash --plant` failing (a lonely token, topk_length and attn_sink too: --lonely --topk-length --sink);
sparse prefill (`prefill-write`, `prefill-flash`): the rung passes, lse in ln where
log2 is promised and the planted bugs fail. With the Python module's folder given, ladder.flashmla_check and
ladder.flashmla_sparse_prefill_check give the same verdicts on the same files.

    test_mla_flashmla_cli.py path/to/ladder [path/to/build/python]
"""
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: cli_expect
from cli_expect import Checks  # noqa: E402

LADDER = sys.argv[1]
PYDIR = sys.argv[2] if len(sys.argv) > 2 else None
checks = Checks(LADDER)
expect, verdict = checks.expect, checks.verdict
verdicts = {}  # candidate folder -> CLI pass


with tempfile.TemporaryDirectory() as tmp:
    j = os.path.join
    case = j(tmp, "case")
    expect("write", ["flashmla", "write", "--out", case, "--seqlens", "130,77", "--s-q", "2", "--h-q", "8"], 0,
           "wrote")
    for sb in ("1", "4"):
        out = j(tmp, f"flash{sb}")
        expect(f"flash split_blocks {sb}", ["flashmla", "flash", case, "--out", out, "--split-blocks", sb], 0, "wrote")
        expect(f"check flash split_blocks {sb}", ["check", "03-mla/flashmla", case, out, "--output", "o,lse"], 0,
               "flashmla_cos_diff")
        verdicts[out] = True
    # A float64 candidate (the same rung at float64): judged by the derived fp64 bound, not the float32 baseline's;
    # the float32 answer written as float64 fails that bound.
    out64 = j(tmp, "flash64")
    expect("flash --float64", ["flashmla", "flash", case, "--out", out64, "--float64"], 0, "float64")
    expect("check flash --float64", ["check", "03-mla/flashmla", case, out64, "--output", "o,lse"], 0, "PASS")
    f32as64 = j(tmp, "flash32as64")
    os.makedirs(f32as64)
    for name in ("o", "lse"):
        np.save(j(f32as64, name + ".npy"), np.load(j(tmp, "flash4", name + ".npy")).astype(np.float64))
    expect("check a float32 answer as float64", ["check", "03-mla/flashmla", case, f32as64, "--output", "o,lse"], 1,
           "FAIL")
    good = j(tmp, "flash4")
    o, lse = np.load(j(good, "o.npy")), np.load(j(good, "lse.npy"))
    mutants = {
        "lse_log2": (o, lse / np.log(2.0)),
        "o_hnd": (np.ascontiguousarray(o.transpose(0, 2, 1, 3)).reshape(o.shape), lse),
    }
    for name, (mo, ml) in mutants.items():
        d = j(tmp, name)
        os.makedirs(d)
        np.save(j(d, "o.npy"), mo)
        np.save(j(d, "lse.npy"), ml)
        expect(f"mutant {name} fails", ["check", "03-mla/flashmla", case, d, "--output", "o,lse"], 1, "FAIL")
        verdicts[d] = False
    # The causal flag ignored: the flash rung on the same inputs with causal = false (a kernel that drops it).
    nc_case = j(tmp, "noncausal_case")
    expect("write non-causal", ["flashmla", "write", "--out", nc_case, "--seqlens", "130,77", "--s-q", "2", "--h-q",
                                "8", "--no-causal"], 0, "wrote")
    nc = j(tmp, "causal_ignored")
    expect("flash non-causal", ["flashmla", "flash", nc_case, "--out", nc], 0, "wrote")
    expect("mutant causal_ignored fails", ["check", "03-mla/flashmla", case, nc, "--output", "o,lse"], 1, "FAIL")
    verdicts[nc] = False
    # A wrong layout name is refused naming the layouts (exit 2).
    expect("unknown layout", ["check", "03-mla/flashmlx", case, good, "--output", "o,lse"], 2, "03-mla/flashmla")
    # The FP8 "with scale" cache and sparse decode: the flash rung passes, each planted bug fails.
    cases = {"fp8": (["--kv-fp8"], ["scale_neighbour", "rope_as_fp8", "scale_divide"]),
             "sparse": (["--topk", "64"], ["invalid_as_row0", "dedup"]),
             "fp8_sparse": (["--kv-fp8", "--topk", "64"], ["invalid_as_row0", "dedup", "scale_neighbour"]),
             "extras": (["--kv-fp8", "--topk", "64", "--lonely", "--topk-length", "--sink"],
                        ["lonely_nan", "topk_length_ignored", "sink_ignored"])}
    more = {}  # (case, candidate folder) -> CLI pass
    for name, (flags, bugs) in cases.items():
        cdir = j(tmp, "case_" + name)
        expect(f"write {name}", ["flashmla", "write", "--out", cdir, "--seqlens", "130,77", "--s-q", "2", "--h-q", "8",
                                 *flags], 0, "wrote")
        if "--kv-fp8" in flags:
            kc = np.load(j(cdir, "kcache.npy"))
            ok = kc.dtype == np.uint8 and kc.shape[1:] == (64, 1, 656)
            verdict(f"{name}: kcache {kc.dtype} {kc.shape} (656 bytes per token)", ok)
        for bug in ["none", *bugs]:
            out = j(tmp, f"{name}_{bug}")
            expect(f"flash {name} --plant {bug}", ["flashmla", "flash", cdir, "--out", out, "--plant", bug], 0, "wrote")
            want = bug == "none"
            expect(f"check {name} {bug} {'passes' if want else 'fails'}",
                   ["check", "03-mla/flashmla", cdir, out, "--output", "o,lse"], 0 if want else 1,
                   "flashmla_cos_diff" if want else "FAIL")
            more[(cdir, out)] = want
    # Sparse prefill: base-2 lse and max_logits; lse in ln and the planted bugs fail.
    pcase = j(tmp, "prefill")
    expect("prefill-write", ["flashmla", "prefill-write", "--out", pcase, "--s-q", "4", "--s-kv", "200", "--topk", "64",
                             "--h-q", "8"], 0, "wrote")
    pre = {}
    xcase = j(tmp, "prefill_extras")  # a lonely token, topk_length, attn_sink
    expect("prefill-write extras", ["flashmla", "prefill-write", "--out", xcase, "--s-q", "4", "--s-kv", "200", "--topk",
                                    "64", "--h-q", "8", "--lonely", "--topk-length", "--sink"], 0, "wrote")
    for cdir, bugs in ((pcase, ("none", "invalid_as_row0", "dedup")),
                       (xcase, ("none", "lonely_nan", "topk_length_ignored", "sink_ignored"))):
        for bug in bugs:
            out = j(tmp, f"{os.path.basename(cdir)}_{bug}")
            expect(f"prefill-flash {os.path.basename(cdir)} --plant {bug}",
                   ["flashmla", "prefill-flash", cdir, "--out", out, "--plant", bug], 0, "wrote")
            want = bug == "none"
            expect(f"check {os.path.basename(cdir)} {bug} {'passes' if want else 'fails'}",
                   ["check", "03-mla/flashmla_sparse_prefill", cdir, out, "--output", "out,max_logits,lse"],
                   0 if want else 1, "flashmla_cos_diff" if want else "FAIL")
            pre[out] = (cdir, want)
    ln = j(tmp, "prefill_lse_ln")
    os.makedirs(ln)
    good = j(tmp, "prefill_none")
    for f in ("out", "max_logits"):
        np.save(j(ln, f + ".npy"), np.load(j(good, f + ".npy")))
    np.save(j(ln, "lse.npy"), np.load(j(good, "lse.npy")) * np.log(2.0))  # natural log where log2 is promised
    expect("check prefill lse in ln fails", ["check", "03-mla/flashmla_sparse_prefill", pcase, ln, "--output",
                                             "out,max_logits,lse"], 1, "FAIL")
    pre[ln] = (pcase, False)
    expect("prefill-flash refuses an FP8 bug", ["flashmla", "prefill-flash", pcase, "--out", j(tmp, "x"), "--plant",
                                                "rope_as_fp8"], 2, "concerns FP8 records")
    if PYDIR:
        sys.path.insert(0, PYDIR)
        import ladder
        for (cdir, d), want in more.items():
            r = ladder.flashmla_check(cdir, np.load(j(d, "o.npy")), np.load(j(d, "lse.npy")))
            verdict(f"python agrees on {os.path.basename(d)}: pass={r['pass']}", r["pass"] == want)
        # numpy arrays straight in: the FP8 records as a uint8 array, the sparse indices, params as keywords
        import json
        cdir = j(tmp, "case_fp8_sparse")
        with open(j(cdir, "case.json")) as f:
            params = json.load(f)["params"]
        arrays = {n: np.load(j(cdir, n + ".npy")) for n in ("q", "kcache", "indices")}
        for bug, want in (("none", True), ("dedup", False)):
            d = j(tmp, f"fp8_sparse_{bug}")
            r = ladder.flashmla_check(arrays, np.load(j(d, "o.npy")), np.load(j(d, "lse.npy")), **params)
            ok = r["pass"] == want and arrays["kcache"].dtype == np.uint8
            verdict(f"python on numpy inputs (uint8 kcache, indices), {bug}: pass={r['pass']}", ok)
        for d, (pc, want) in pre.items():
            r = ladder.flashmla_sparse_prefill_check(pc, *(np.load(j(d, f + ".npy")) for f in ("out", "max_logits",
                                                                                                   "lse")))
            verdict(f"python agrees on {os.path.basename(d)}: pass={r['pass']} "
                    f"cos_diff(out)={r['out']['metrics'].get('flashmla_cos_diff')}", r["pass"] == want)
        for d, want in verdicts.items():
            r = ladder.flashmla_check(case, np.load(j(d, "o.npy")), np.load(j(d, "lse.npy")))
            verdict(f"python agrees on {os.path.basename(d)}: pass={r['pass']} "
                    f"cos_diff(o)={r['o']['metrics'].get('flashmla_cos_diff')}",
                    r["pass"] == want and "flashmla_cos_diff" in r["o"]["metrics"])

sys.exit(checks.exit_code())

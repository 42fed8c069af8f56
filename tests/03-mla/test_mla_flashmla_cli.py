#!/usr/bin/python3
"""Stage 03 in FlashMLA's interface through the `ladder` binary and Python: `ladder flashmla write` writes a case
in FlashMLA's layouts (s_q = 2, causal), the flash_mla rung's o, lse (`ladder flashmla flash`, two split sizes)
pass `ladder check 03-mla/flashmla` (exit 0, FlashMLA's cos_diff printed beside the verdict); mutants fail (exit
1): lse in log2, o written [h_q, s_q] into the [s_q, h_q] buffer, the causal flag ignored. With the Python
module's folder given, ladder.flashmla_check gives the same verdict on the same files.

    test_mla_flashmla_cli.py path/to/ladder [path/to/build/python]
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

LADDER = sys.argv[1]
PYDIR = sys.argv[2] if len(sys.argv) > 2 else None
failures = 0
verdicts = {}  # candidate folder -> CLI pass


def expect(name, args, rc, out_has):
    global failures
    p = subprocess.run([LADDER, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ok = p.returncode == rc and out_has in p.stdout + p.stderr
    print(f"{'ok  ' if ok else 'FAIL'} {name}: exit {p.returncode} (want {rc})")
    if not ok:
        print(p.stdout, p.stderr)
        failures += 1
    return p


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
    if PYDIR:
        sys.path.insert(0, PYDIR)
        import ladder
        for d, want in verdicts.items():
            r = ladder.flashmla_check(case, np.load(j(d, "o.npy")), np.load(j(d, "lse.npy")))
            ok = r["pass"] == want and "flashmla_cos_diff" in r["o"]["metrics"]
            print(f"{'ok  ' if ok else 'FAIL'} python agrees on {os.path.basename(d)}: pass={r['pass']} "
                  f"cos_diff(o)={r['o']['metrics'].get('flashmla_cos_diff')}")
            failures += 0 if ok else 1

sys.exit(1 if failures else 0)

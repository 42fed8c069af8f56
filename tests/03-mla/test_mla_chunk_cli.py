#!/usr/bin/python3
"""Stage 03's chunk shape through the `ladder` binary: `ladder run` of the prefill rung on the ragged prefill
golden passes `ladder check` (exit 0) on u, lse and kv_rows; a candidate made with one sequence's q_len off by
one (the oracle of the same tokens split 7, 2, 12 instead of 7, 1, 13) fails it (exit 1).

    test_mla_chunk_cli.py path/to/ladder
"""
import os
import shutil
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: cli_expect
from cli_expect import Checks  # noqa: E402

LADDER = sys.argv[1]
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "data", "golden", "03-mla")
checks = Checks(LADDER)
expect = checks.expect


with tempfile.TemporaryDirectory() as tmp:
    j = os.path.join
    case = j(ROOT, "prefill_ragged")
    for rung in ("prefill", "chunk_absorbed", "flash_mla"):
        out = j(tmp, rung)
        expect(f"run {rung} on prefill_ragged", ["run", "03-mla", rung, "--case", case, "--out", out], 0, "wrote")
        outputs = "u,lse,kv_rows" if rung == "prefill" else "u,lse"
        expect(f"check {rung}'s {outputs}", ["check", "03-mla", case, out, "--output", outputs], 0, "PASS")
    # The same inputs with sequence 1's q_len one too large (and 2's one too small, so N is kept).
    wrong = j(tmp, "wrong_in")
    os.makedirs(wrong)
    for d in (case, j(ROOT, "model_small")):
        for f in os.listdir(d):
            if f.endswith(".npy") and f not in ("u.npy", "scores.npy", "lse.npy", "kv_rows.npy"):
                shutil.copy(j(d, f), j(wrong, f))
    q_lens, prefix = np.load(j(case, "q_lens.npy")), np.load(j(case, "prefix.npy"))
    assert list(q_lens) == [7, 1, 13] and list(prefix) == [0, 64, 37], (q_lens, prefix)
    np.save(j(wrong, "q_lens.npy"), q_lens + np.array([0, 1, -1], dtype=q_lens.dtype))
    np.save(j(wrong, "prefix.npy"), prefix - np.array([0, 1, -1], dtype=prefix.dtype))
    expect("oracle of the off-by-one chunk", ["oracle", "03-mla", "--inputs", wrong, "--out", j(tmp, "wrong")], 0,
           "wrote")
    np.save(j(tmp, "wrong_u.npy"), np.load(j(tmp, "wrong", "u.npy")).astype(np.float32))
    expect("check: a q_len off by one fails", ["check", "03-mla", case, j(tmp, "wrong_u.npy"), "--output", "u"], 1,
           "FAIL")

print(f"{checks.failures} failures")
sys.exit(checks.exit_code())

#!/usr/bin/python3
"""Stage 04 in DeepGEMM's grouped-GEMM layouts through the `ladder` binary and Python: `ladder deepgemm write` writes
a contiguous and a masked case, the ragged_dot rung's d (`ladder deepgemm ragged`) passes `ladder check
04-moe/deepgemm_LAYOUT CASE DIR` (exit 0, DeepGEMM's calc_diff printed beside the verdict); mutants fail (exit 1): a
padding row written, one expert's segment shifted by a row; NaN in rows past masked_m passes (not judged), and a
padding row written passes in a case written with --padding-rows unjudged; an FP8 case with UE8M0 scales passes
with stage 07's fp8_block rung; a k-grouped case's candidates (the rung, float64 here) pass and a group boundary
moved by one row fails; its FP8 form (per-channel scales along K): the rung and a float64 numpy d pass, the
neighbouring K block's scale, a boundary one row late and untransposed scales fail. With the Python module's folder given,
ladder.deepgemm_check gives the same verdict on the same files.

    test_moe_deepgemm_cli.py path/to/ladder [path/to/build/python]
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
verdicts = []  # (layout, case, candidate folder, CLI pass)


def save(folder, d):
    os.makedirs(folder)
    np.save(os.path.join(folder, "d.npy"), d)


with tempfile.TemporaryDirectory() as tmp:
    j = os.path.join
    shape = ["--group-m", "0,97,1,130,40", "--n", "24", "--k", "200"]
    for layout in ("contiguous", "masked"):
        case, good = j(tmp, layout), j(tmp, layout + "_ragged")
        stage = f"04-moe/deepgemm_{layout}"
        expect(f"write {layout}", ["deepgemm", "write", "--layout", layout, "--out", case, *shape], 0, "wrote")
        expect(f"ragged {layout}", ["deepgemm", "ragged", case, "--out", good], 0, "wrote")
        expect(f"check ragged {layout}", ["check", stage, case, good], 0, "deepgemm_calc_diff")
        verdicts.append((layout, case, good, True))
    # Contiguous mutants: the row after expert 1's segment written (a store one row late), expert 3's segment
    # shifted down by a row.
    case = j(tmp, "contiguous")
    d, idx = np.load(j(tmp, "contiguous_ragged", "d.npy")), np.load(j(case, "m_indices.npy"))
    end = int(np.flatnonzero(idx == 1)[-1])
    written = d.copy()
    written[end + 1] = written[end]
    seg = np.flatnonzero(idx == 3)
    shifted = d.copy()
    shifted[seg[0] + 1:seg[-1] + 2] = d[seg[0]:seg[-1] + 1]
    shifted[seg[0]] = 0
    for name, m in (("padding_row_written", written), ("segment_shifted", shifted)):
        save(j(tmp, name), m)
        expect(f"mutant {name} fails", ["check", "04-moe/deepgemm_contiguous", case, j(tmp, name)], 1, "FAIL")
        verdicts.append(("contiguous", case, j(tmp, name), False))
    # The same padding row written, in a case whose padding rows are unjudged (DeepGEMM's own tests' choice).
    loose = j(tmp, "contiguous_unjudged")
    expect("write unjudged", ["deepgemm", "write", "--out", loose, "--padding-rows", "unjudged", *shape], 0, "wrote")
    expect("padding row written passes where unjudged", ["check", "04-moe/deepgemm_contiguous", loose,
                                                          j(tmp, "padding_row_written")], 0, "not judged")
    verdicts.append(("contiguous", loose, j(tmp, "padding_row_written"), True))
    # Masked: NaN past masked_m is not judged.
    case = j(tmp, "masked")
    d, mm = np.load(j(tmp, "masked_ragged", "d.npy")), np.load(j(case, "masked_m.npy"))
    nan_past = d.copy()
    for g, m in enumerate(mm):
        nan_past[g, m:] = np.nan
    save(j(tmp, "nan_past"), nan_past)
    expect("NaN past masked_m passes", ["check", "04-moe/deepgemm_masked", case, j(tmp, "nan_past")], 0, "not judged")
    verdicts.append(("masked", case, j(tmp, "nan_past"), True))
    # FP8 with UE8M0 scales: stage 07's fp8_block rung per expert passes the derived bound.
    fp8 = j(tmp, "contiguous_fp8")
    expect("write fp8", ["deepgemm", "write", "--fp8", "--scales", "ue8m0", "--out", fp8, *shape], 0, "sa, sb")
    expect("fp8_block rung", ["deepgemm", "ragged", fp8, "--out", j(tmp, "fp8_rung")], 0, "fp8_block")
    expect("check fp8", ["check", "04-moe/deepgemm_contiguous_fp8", fp8, j(tmp, "fp8_rung")], 0, "bound rule")
    verdicts.append(("contiguous_fp8", fp8, j(tmp, "fp8_rung"), True))
    # SM100's packed int32 UE8M0 scales: the same rung passes; its d equals the float32-scale case's bit for bit.
    pk = j(tmp, "contiguous_fp8_packed")
    expect("write fp8 packed", ["deepgemm", "write", "--fp8", "--scales", "ue8m0_packed", "--out", pk, *shape], 0, "sa")
    sa = np.load(j(pk, "sa.npy"))
    ok = sa.dtype == np.int32 and np.array_equal(
        np.load(j(pk, "a.npy")), np.load(j(fp8, "a.npy")))
    verdict(f"packed sa is int32 {sa.shape}", ok)
    expect("fp8_block rung packed", ["deepgemm", "ragged", pk, "--out", j(tmp, "fp8_rung_packed")], 0, "fp8_block")
    expect("check fp8 packed", ["check", "04-moe/deepgemm_contiguous_fp8", pk, j(tmp, "fp8_rung_packed")], 0,
           "bound rule")
    same = np.array_equal(np.load(j(tmp, "fp8_rung_packed", "d.npy")), np.load(j(tmp, "fp8_rung", "d.npy")))
    verdict("packed and float32 UE8M0 scales give the same d", same)
    verdicts.append(("contiguous_fp8", pk, j(tmp, "fp8_rung_packed"), True))
    expect("unknown layout", ["check", "04-moe/deepgemm_maskd", case, j(tmp, "nan_past")], 2, "04-moe/deepgemm_masked")
    expect("bad --layout", ["deepgemm", "write", "--layout", "kgrouped", "--out", j(tmp, "x")], 2, "--layout")
    # The k-grouped layout (weight gradient, groups stacked along K; ks = 256, 0, 128, 384 by default): the
    # reverse-order candidate passes, and so does d computed here in float64 from the files; the same with the
    # boundary between the first two non-empty groups moved down one row fails.
    kg = j(tmp, "k_grouped")
    expect("write k_grouped", ["deepgemm", "write", "--layout", "k_grouped", "--n", "24", "--out", kg], 0, "ks, c")
    expect("k_grouped candidate", ["deepgemm", "ragged", kg, "--out", j(tmp, "kg_rung")], 0, "k-grouped")
    expect("check k_grouped", ["check", "04-moe/deepgemm_k_grouped", kg, j(tmp, "kg_rung")], 0, "deepgemm_calc_diff")
    a, b, c = (np.load(j(kg, name + ".npy")).astype(np.float64) for name in ("a", "b", "c"))
    ends = np.cumsum(np.load(j(kg, "ks.npy")))
    for name, shift, want in (("kg_numpy", 0, 0), ("kg_boundary", 1, 1)):
        cut = ends.copy()
        cut[0] += shift  # group 1 is empty (ks[1] = 0): groups 0 and 2 meet at cut[0] == cut[1]
        cut[1] += shift
        d = np.stack([c[g] + a[lo:hi].T @ b[lo:hi] for g, (lo, hi) in enumerate(zip([0, *cut[:-1]], cut))])
        save(j(tmp, name), d.astype(np.float32))
        expect(f"{name} (boundary moved by {shift})", ["check", "04-moe/deepgemm_k_grouped", kg, j(tmp, name)], want,
               "deepgemm_calc_diff" if want == 0 else "FAIL")
        verdicts.append(("k_grouped", kg, j(tmp, name), want == 0))
    # Its FP8 form: E4M3 a, b with per-channel scales per 128 rows of K, sa [6, align4(26) = 28] (MN-major, the TMA
    # padding unread). The fp8_block rung passes, and so does d computed here from the files (codes times scales,
    # float64); the same d with the neighbouring K block's scales, with the boundary moved one row, or with the scales
    # read untransposed fails. Packed UE8M0 scales (one int32 row per group here) give the same verdict to the rung.
    k8 = j(tmp, "k_grouped_fp8")
    expect("write k_grouped --fp8", ["deepgemm", "write", "--layout", "k_grouped", "--fp8", "--m", "26", "--n", "24",
                                     "--out", k8], 0, "sa, sb")
    expect("k_grouped fp8 rung", ["deepgemm", "ragged", k8, "--out", j(tmp, "k8_rung")], 0, "fp8_block rung")
    expect("check k_grouped fp8", ["check", "04-moe/deepgemm_k_grouped_fp8", k8, j(tmp, "k8_rung")], 0,
           "deepgemm_calc_diff")
    verdicts.append(("k_grouped_fp8", k8, j(tmp, "k8_rung"), True))
    a, b, c, sa, sb = (np.load(j(k8, name + ".npy")).astype(np.float64) for name in ("a", "b", "c", "sa", "sb"))
    verdict(f"k_grouped fp8 scales are [K/128, align4(m)]: sa {sa.shape}, sb {sb.shape}",
            sa.shape == (6, 28) and sb.shape == (6, 24))
    ends = np.cumsum(np.load(j(k8, "ks.npy")))
    blk = np.arange(a.shape[0]) // 128
    for name, fault, want in (("k8_numpy", None, 0), ("k8_neighbour", "neighbour", 1), ("k8_boundary", "boundary", 1),
                              ("k8_untransposed", "untransposed", 1)):
        kb = blk ^ 1 if fault == "neighbour" else blk
        if fault == "untransposed":  # sa read as [m, K/128] from the same memory
            ta = sa.reshape(-1)[:26 * 6].reshape(26, 6).T[kb, :]
            tb = sb.reshape(-1)[:24 * 6].reshape(24, 6).T[kb, :]
        else:
            ta, tb = sa[kb, :26], sb[kb, :24]
        x, y = a * ta, b * tb
        cut = ends.copy()
        if fault == "boundary":
            cut[0] += 1  # group 1 is empty: groups 0 and 2 meet at cut[0] == cut[1]
            cut[1] += 1
        d = np.stack([c[g] + x[lo:hi].T @ y[lo:hi] for g, (lo, hi) in enumerate(zip([0, *cut[:-1]], cut))])
        save(j(tmp, name), d)
        expect(f"{name}", ["check", "04-moe/deepgemm_k_grouped_fp8", k8, j(tmp, name)], want,
               "deepgemm_calc_diff" if want == 0 else "FAIL")
        verdicts.append(("k_grouped_fp8", k8, j(tmp, name), want == 0))
    k8p = j(tmp, "k_grouped_fp8_packed")
    expect("write k_grouped --fp8 --scales ue8m0_packed", ["deepgemm", "write", "--layout", "k_grouped", "--fp8",
                                                           "--scales", "ue8m0_packed", "--out", k8p], 0, "sa, sb")
    verdict("packed k-grouped sa: <i4 [3, 24]", np.load(j(k8p, "sa.npy")).dtype == np.int32
            and np.load(j(k8p, "sa.npy")).shape == (3, 24))
    expect("k_grouped fp8 packed rung", ["deepgemm", "ragged", k8p, "--out", j(tmp, "k8p_rung")], 0, "fp8_block")
    expect("check k_grouped fp8 packed", ["check", "04-moe/deepgemm_k_grouped_fp8", k8p, j(tmp, "k8p_rung")], 0,
           "deepgemm_calc_diff")
    expect("k_grouped --fp8 ks not a multiple of 128", ["deepgemm", "write", "--layout", "k_grouped", "--fp8", "--ks",
                                                         "256,64", "--k-alignment", "64", "--out", j(tmp, "y")], 2,
           "multiple of 128")
    expect("bad --ks", ["deepgemm", "write", "--layout", "k_grouped", "--ks", "12x", "--out", j(tmp, "y")], 2, "--ks")
    if PYDIR:
        sys.path.insert(0, PYDIR)
        import ladder
        for layout, case, d, want in verdicts:
            r = ladder.deepgemm_check(layout, case, np.load(j(d, "d.npy")))
            verdict(f"python agrees on {os.path.basename(d)} ({layout}): pass={r['pass']} "
                    f"calc_diff={r['metrics'].get('deepgemm_calc_diff')}",
                    r["pass"] == want and "deepgemm_calc_diff" in r["metrics"])

sys.exit(checks.exit_code())

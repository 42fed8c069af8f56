#!/usr/bin/python3
"""`ladder describe / oracle / check 06-disagg`, `ladder simulate` (chunked prefill; memory flat without --records) and
`ladder deploy` (a serving deployment, its bad input), end to end.

    test_disagg_cli.py path/to/ladder
A request list made with numpy (as another project would make it) -> the simulator's per-request times
-> a candidate judged exactly: the oracle's own times pass; one ulp or 1e-9 off fails (exit 1); a
float32 candidate, a wrong shape or a bad param is one line and exit 2.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: cli_expect
from cli_expect import Checks  # noqa: E402

LADDER = sys.argv[1]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/06-disagg/ -> the root
checks = Checks(LADDER, tail=2000)
expect, verdict = checks.expect, checks.verdict


with tempfile.TemporaryDirectory() as tmp:
    j = lambda *a: os.path.join(tmp, *a)
    expect("describe 06-disagg names its inputs and the exact rule", ["describe", "06-disagg"], 0, "arrival_ms")
    rng = np.random.default_rng(606)
    n = 57
    ins = j("ins")
    os.makedirs(ins)
    np.save(j("ins", "arrival_ms.npy"), np.cumsum(rng.exponential(300.0, n)))  # Poisson, 3.3 req/s
    np.save(j("ins", "input_len.npy"), rng.integers(1, 1025, n))
    np.save(j("ins", "output_len.npy"), rng.integers(1, 114, n).astype(np.int32))
    with open(j("ins", "params.json"), "w") as f:
        json.dump({"placement": {"colocated": 1}, "workers": {"chunked_prefill_tokens": 512}}, f)
    expect("oracle 06-disagg on a user-made request list", ["oracle", "06-disagg", "--inputs", ins, "--out", j("case")],
           0, "wrote")
    ttft = np.load(j("case", "ttft_ms.npy"))
    assert ttft.shape == (n,) and ttft.dtype == np.float64 and (ttft > 0).all(), ttft
    for out in ("ttft_ms", "tpot_ms", "finish_ms", "prefill_worker", "slo_met"):
        expect(f"check: the oracle's own {out} passes", ["check", "06-disagg", j("case"), j("case", out + ".npy"),
               "--output", out], 0, "PASS")
    bad = ttft.copy()
    bad[11] = np.nextafter(bad[11], np.inf)
    np.save(j("ulp.npy"), bad)
    expect("check: TTFT one ulp off fails", ["check", "06-disagg", j("case"), j("ulp.npy")], 1, "[11]")
    bad = ttft.copy()
    bad[0] += 1e-9
    np.save(j("nano.npy"), bad)
    expect("check: TTFT 1e-9 ms off fails", ["check", "06-disagg", j("case"), j("nano.npy")], 1, "FAIL")
    np.save(j("f32.npy"), ttft.astype(np.float32))
    expect("check: a float32 candidate is bad input", ["check", "06-disagg", j("case"), j("f32.npy")], 2,
           "dtype <f4 where <f8 is required", err_one_line=True)
    np.save(j("short.npy"), ttft[:-1])
    expect("check: a wrong shape is bad input", ["check", "06-disagg", j("case"), j("short.npy")], 2,
           f"shape [{n - 1}]", err_one_line=True)
    with open(j("ins", "params.json"), "w") as f:
        json.dump({"placement": {"prefill": 1, "decode": 1}, "workers": {"chunked_prefill_tokens": 512}}, f)
    expect("oracle: chunking on a disaggregated placement is bad input", ["oracle", "06-disagg", "--inputs", ins,
           "--out", j("c2")], 2, "chunked_prefill_tokens = 512 applies to colocated", err_one_line=True)
    os.remove(j("ins", "params.json"))
    np.save(j("ins", "input_len.npy"), rng.integers(1, 1025, n).astype(np.float64))
    expect("oracle: float lengths are bad input", ["oracle", "06-disagg", "--inputs", ins, "--out", j("c3")], 2,
           "input_len", err_one_line=True)
    # `ladder simulate`: the chunked placement key, and its validation.
    with open(os.path.join(ROOT, "data", "disagg", "distserve-fig1.json")) as f:
        cfg = json.load(f)
    cfg["placements"] = [{"name": "colocated chunked", "colocated": 1, "chunked_prefill_tokens": 256}]
    with open(j("chunked.json"), "w") as f:
        json.dump(cfg, f)
    expect("simulate: a chunked colocated placement runs, invariants hold", ["simulate", "--config", j("chunked.json"),
           "--requests", "300", "--no-goodput"], 0, "invariants: all hold")
    cfg["placements"][0]["chunked_prefill_tokens"] = 0
    with open(j("bad.json"), "w") as f:
        json.dump(cfg, f)
    expect("simulate: chunked_prefill_tokens 0 is bad input", ["simulate", "--config", j("bad.json")], 2,
           "placements[0].chunked_prefill_tokens = 0 violates >= 1", err_one_line=True)
    # Given means checked: --rate 0 / --requests 0 are refused, not read as "the config's value" (issue 39).
    fig1 = os.path.join(ROOT, "data", "disagg", "distserve-fig1.json")
    for args, msg in ((["--rate", "0"], "--rate = 0 violates rate > 0"), (["--rate", "-2"], "--rate = -2 violates"),
                      (["--requests", "0"], "--requests = 0 violates requests >= 1"),
                      (["--requests", "-5"], "--requests = -5 violates")):
        expect(f"simulate {' '.join(args)} is bad input", ["simulate", "--config", fig1, "--no-goodput", *args], 2,
               msg, err_one_line=True)
    # `ladder deploy`: a serving deployment end to end (data/serving/*.json), one concurrency, and its bad input.
    a2 = os.path.join(ROOT, "data", "serving", "huawei-a2.json")
    expect("deploy --help names the file and the overrides", ["deploy", "--help"], 0, "--tpot-limit")
    expect("deploy: the A2 at the report's 72 per card meets a 100 ms TPOT", ["deploy", a2, "--per-card", "72"], 0,
           "meets it")
    for args, msg in ((["--acceptance", "1.5"], "--acceptance = 1.5 violates 0 <= p <= 1"),
                      (["--tpot-limit", "0"], "--tpot-limit = 0 violates > 0"),
                      (["--per-card", "0"], "--per-card = 0 violates >= 1"),
                      (["--waves", "2"], "--waves = 2 violates >= 3"),
                      (["--output", "1"], "--output = 1 violates >= 2"),
                      (["--prefill-instances", "0"], "--prefill-instances = 0 violates >= 1")):
        expect(f"deploy {' '.join(args)} is bad input", ["deploy", a2, *args], 2, msg, err_one_line=True)
    expect("deploy: a missing file is bad input", ["deploy", j("none.json")], 2, "no such file", err_one_line=True)
    expect("deploy: a layout file is named as one", ["deploy", os.path.join(ROOT, "data", "deployments",
           "huawei-a2-decode.json")], 2, "is a layout (data/deployments", err_one_line=True)
    with open(a2) as f:
        dep = json.load(f)
    dep["mtp"]["draft"] = 3
    with open(j("dep.json"), "w") as f:
        json.dump(dep, f)
    expect("deploy: more drafts than MTP layers is bad input", ["deploy", j("dep.json")], 2,
           "mtp.draft = 3 violates", err_one_line=True)



def peak_rss_kb(args):
    """The peak resident memory of one `ladder` run (its own rusage, from wait4), and its exit status."""
    p = subprocess.Popen([LADDER, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_maxrss, p.returncode


# `ladder simulate` keeps no per-request record unless asked (--records, --plot): memory is flat in the
# request count. Two placements of 20,000 and of 400,000 requests: without --records the peaks are within
# 4 MB; with them the larger run holds 2 x 400,000 records of about 100 B (80 MB), which the check sees.
# (A child's peak starts at this Python process's size, inherited before exec: growth above it shows.)
fig1 = os.path.join(ROOT, "data", "disagg", "distserve-fig1.json")
base = ["simulate", "--config", fig1, "--no-goodput", "--requests"]
small, rc1 = peak_rss_kb(base + ["20000"])
large, rc2 = peak_rss_kb(base + ["400000"])
ok = rc1 == rc2 == 0 and large - small < 4096
verdict(f"simulate: memory flat in the request count without --records: peak {small} KB at "
        f"20,000 requests, {large} KB at 400,000", ok)
kept, rc3 = peak_rss_kb(base + ["400000", "--records"])
ok = rc3 == 0 and kept - small > 40000
verdict(f"simulate --records keeps the records: peak {kept} KB at 400,000 requests", ok)

print("PASSED" if checks.failures == 0 else f"FAILED: {checks.failures} checks")
sys.exit(checks.exit_code())

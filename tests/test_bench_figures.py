#!/usr/bin/python3
"""scripts/bench-report's pieces that decide what a report says, on made-up numbers (nothing is timed):
the CPU family named from cpuid's vendor/family/model, and a compute-bound figure's two rows (vs the FMA
peak, vs the faster of the peers; oneDNN missing leaves Eigen). Usage: test_bench_figures.py [--planted]
(--planted: the peer picked is the slower one; the test must fail)."""
import importlib.machinery
import os
import sys

SCRIPTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts")
sys.path.insert(0, SCRIPTS)
import bench_figures  # noqa: E402

report = importlib.machinery.SourceFileLoader("bench_report", os.path.join(SCRIPTS, "bench-report")).load_module()
if "--planted" in sys.argv:
    bench_figures.max = min  # the wrong peer: the slower one

fails = []


def check(cond, what):
    if not cond:
        fails.append(what)


for (vendor, fam, model), want in {("AuthenticAMD", "26", "2"): "Zen 5", ("AuthenticAMD", "25", "17"): "Zen 4",
                                   ("AuthenticAMD", "25", "97"): "Zen 4", ("AuthenticAMD", "25", "1"): "Zen 3",
                                   ("AuthenticAMD", "23", "49"): "Zen / Zen 2",
                                   ("GenuineIntel", "6", "143"): "Intel family 6 model 0x8f",
                                   ("AuthenticAMD", "?", "?"): "unknown"}.items():
    got = report.family_name(vendor, fam, model)
    check(got == want, f"family_name({vendor}, {fam}, {model}) = {got!r}, want {want!r}")

R = []
bench_figures.compute_bound(R, "02", "tiled", 80.0, 400.0, 50.0, 100.0)
check(len(R) == 2, f"two records, got {len(R)}")
check(R[0]["ratio"] == 0.2 and R[0]["target"] == 0.75 and R[0]["met"] is False, f"vs peak: {R[0]}")
check(R[1]["bound"] == 100.0 and R[1]["ratio"] == 0.8 and R[1]["met"] is False, f"vs best peer: {R[1]}")
R = []
bench_figures.compute_bound(R, "02", "tiled", 95.0, 400.0, 100.0, None)  # built without oneDNN: Eigen is the peer
check(R[1]["bound"] == 100.0 and R[1]["met"] is True and "oneDNN missing" in R[1]["name"], f"no oneDNN: {R[1]}")

for f in fails:
    print("FAIL:", f)
print(f"test_bench_figures: {'FAILED' if fails else 'passed'} ({len(fails)} failures)")
sys.exit(1 if fails else 0)

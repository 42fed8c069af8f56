#!/usr/bin/python3
"""DeepEP's buffers produced across MPI ranks, judged as a candidate (mpi label).

    tests/test_ep_deepep.py MPIRUN EP_MOE LADDER MODE NP [PLANT OUTPUT...]

1. `ladder deepep write --mode MODE --ranks NP` writes a case (the inputs the oracle's expected outputs come from);
2. `mpirun -np NP ladder-ep-moe --deepep MODE --case CASE --out DIR` runs the dispatch / combine across the ranks and
   writes every output of the layout to DIR (exit 0 when its in-process check passes);
3. `ladder check 04-moe/deepep_MODE CASE DIR --output <every output>` judges DIR.
Without PLANT all three succeed and every output passes, and -np 1 on the case is refused. With PLANT (next-rank | drop-scale: the program's
--test-plant-PLANT) both verdicts must be FAIL, and each OUTPUT named after it must be among the failed ones.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # tests/: cli_expect
from cli_expect import Checks  # noqa: E402

mpirun, ep_moe, ladder, mode, np = sys.argv[1:6]
plant = sys.argv[6] if len(sys.argv) > 6 else None
must_fail = sys.argv[7:]
layout = "04-moe/deepep_" + mode
checks = Checks(ladder)


def check(ok, what, detail=""):  # one ok / FAIL line, failures counted (cli_expect's verdict)
    return checks.verdict(what, ok, detail)



def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return p.returncode, p.stdout + p.stderr


with tempfile.TemporaryDirectory() as tmp:
    case, cand = os.path.join(tmp, "case"), os.path.join(tmp, "cand")
    rc, out = run([ladder, "deepep", "write", "--mode", mode, "--ranks", np, "--out", case])
    check(rc == 0, f"ladder deepep write --mode {mode} --ranks {np}", out)
    with open(os.path.join(case, "case.json")) as f:
        outputs = json.load(f)["outputs"]
    cmd = [mpirun, "--oversubscribe", "-np", np, ep_moe, "--deepep", mode, "--case", case, "--out", cand]
    rc, out = run(cmd + ([f"--test-plant-{plant}"] if plant else []))
    print(out.strip().splitlines()[0] if out.strip() else "(no output)")
    verdict = re.search(rf"{layout} \(in process\): (PASS|FAIL)", out)
    check(verdict is not None and verdict.group(1) == ("FAIL" if plant else "PASS") and (rc != 0) == bool(plant),
          f"ladder-ep-moe on {np} ranks: in-process verdict {'FAIL' if plant else 'PASS'}, exit {'!= 0' if plant else '0'}",
          out)
    rc, out = run([ladder, "check", layout, case, cand, "--output", ",".join(outputs)])
    print(out.strip())
    passed = set(re.findall(r"\((\w+)\): PASS", out))
    failed = set(re.findall(r"\((\w+)\): FAIL", out))
    if plant:
        check(rc == 1, "ladder check: exit 1 (the planted bug is caught)")
        for o in must_fail:
            check(o in failed, f"ladder check: {o} FAILS")
    else:
        check(rc == 0 and passed == set(outputs), f"ladder check: every output of {layout} passes ({len(outputs)})")
        # A launch whose rank count is not the case's num_ranks: one error naming both, exit 2, nothing written.
        rc, out = run([mpirun, "--oversubscribe", "-np", "1", ep_moe, "--deepep", mode, "--case", case, "--out",
                       os.path.join(tmp, "one")])
        check(rc != 0 and f"has num_ranks = {np}, violates the rank count 1" in out and
              not os.path.exists(os.path.join(tmp, "one")), "-np 1 on this case: one error naming num_ranks", out)

print(f"ep-moe deepep {mode} np{np}{' planted ' + plant if plant else ''}: {'FAIL' if checks.failures else 'OK'}")
sys.exit(checks.exit_code())

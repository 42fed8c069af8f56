"""`scripts/lab notebook STAGE [--solution]`: the stage's notebook (notebooks/STAGE.ipynb) run on the
student's code.

The lab build (build-lab-STAGE, the folder `scripts/lab build` uses) also links libladder.so, with the
student's objects first (CMakeLists.txt), and scripts/run-notebook runs the notebook with the starter's
headers ahead of the reference's (LADDER_INCLUDE_FIRST) and that library loaded (LADDER_BUILD): every
function the student writes, whether the notebook instantiates it from the headers or calls it in the
library, is the student's. The stored outputs in the .ipynb are never rewritten from a lab run.
--solution runs the same notebook on the reference (build/), as `make test` does.
"""
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# CI (`scripts/lab check`): the notebook of these stages must fail on the untouched starter while a cell
# runs (not at compile time), and pass on a copy of the reference laid out as a starter -- proof that the
# lab's notebook runs the student's code, links, and accepts a correct solution. One stage: each run
# costs a lab build of libladder.so and a notebook run (about a minute).
CI_STAGES = ("04-moe",)


def notebook(stage, solution, jobs, lab_dir, compile_lab, starter=None, bdir=None, capture=False):
    """Returns run-notebook's exit code (0: every cell ran; 1: a cell failed, named), or 2 (no notebook
    for the stage, or the build failed); with capture=True, (exit code, output). `starter` and `bdir`:
    another starter folder and lab build folder (ci_check below)."""
    nb = os.path.join(ROOT, "notebooks", stage + ".ipynb")
    if not os.path.exists(nb):
        print(f"lab notebook: stage {stage} has no notebook (notebooks/{stage}.ipynb)", file=sys.stderr)
        return (2, "no notebook") if capture else 2
    env = dict(os.environ)
    env.pop("LADDER_INCLUDE_FIRST", None)
    if solution:
        bdir = "build"
        if not os.path.exists(os.path.join(ROOT, bdir, "CMakeCache.txt")):
            subprocess.run(["cmake", "--preset", "ci"], cwd=ROOT, stdout=subprocess.DEVNULL, check=False)
        built = subprocess.run(["cmake", "--build", bdir, "-j", jobs, "--target", "ladder_shared"], cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if built.returncode != 0:
            print(built.stdout[-3000:])
            return (2, "build failed") if capture else 2
        who = "the reference"
    else:
        bdir = bdir or "build-lab-" + stage
        starter = starter or os.path.relpath(os.path.join(lab_dir(stage), "starter"), ROOT)
        if not compile_lab(stage, bdir, starter, jobs, targets=["ladder_shared"]):
            return (2, "build failed") if capture else 2
        env["LADDER_INCLUDE_FIRST"] = os.path.join(ROOT, starter, "ref", "include")
        who = "the code in " + starter
    env["LADDER_BUILD"] = os.path.join(ROOT, bdir)
    print(f"lab notebook {stage}: notebooks/{stage}.ipynb on {who}, library {bdir}/lib/libladder.so", flush=True)
    cmd = [os.path.join(ROOT, "scripts", "run-notebook"), nb]
    if not capture:
        return subprocess.run(cmd, cwd=ROOT, env=env).returncode
    p = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return p.returncode, p.stdout


def ci_check(stage, jobs, lab, lab_dir, compile_lab):
    """The two runs of CI_STAGES; returns True when both behave, printing one line each."""
    rc, out = notebook(stage, False, jobs, lab_dir, compile_lab, capture=True)
    starter_ok = rc == 1 and "runtime failure" in out
    verdict = "fails while a cell runs, as it must" if starter_ok else f"does NOT fail while a cell runs (exit {rc})"
    print(f"lab check {stage}: the notebook on the untouched starter {verdict}")
    if not starter_ok:
        print(out[-2000:])
    src = "build-lab-" + stage + "-solution-src"  # the reference's files, laid out as a starter
    shutil.rmtree(os.path.join(ROOT, src), ignore_errors=True)
    for rel in lab["files"]:
        os.makedirs(os.path.dirname(os.path.join(ROOT, src, rel)), exist_ok=True)
        shutil.copy(os.path.join(ROOT, rel), os.path.join(ROOT, src, rel))
    rc, out = notebook(stage, False, jobs, lab_dir, compile_lab, starter=src,
                       bdir="build-lab-" + stage + "-solution", capture=True)
    verdict = "passes, as it must" if rc == 0 else f"FAILS (exit {rc})"
    print(f"lab check {stage}: the notebook on the reference laid out as a starter {verdict}")
    if rc != 0:
        print(out[-2000:])
    return starter_ok and rc == 0

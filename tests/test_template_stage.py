#!/usr/bin/python3
"""tests/test_template_stage.py BUILD_DIR -- adding a stage edits no shared file (issue 37, chapters/adding-a-stage.md).

The template stage examples/stage-template/ (stage 99-rowsum: its ref/include/ladder/99-rowsum/, ref/src/99-rowsum/
and tools/ladder/99-rowsum/ folders, laid out as in this tree) is built from that one folder: a second build
directory, BUILD_DIR-template (build -> build-template: a sibling at the same depth, so that ccache's base_dir
gives the shared units the same relative paths, hence the same compile commands, as in BUILD_DIR), configured
from this same tree as BUILD_DIR is (its CMakeCache.txt:
build type, CUDA, compiler) plus -DLADDER_STAGE_DIRS=examples/stage-template, so the same generated lists
that find the six stages in this tree find the seventh in the template's. Every file of the tree is left as
it is (checked: the tree's files hash the same before and after). Then the new stage is used the way a user
would:

  ladder list / describe 99-rowsum      the record and the contract, found from the folders
  ladder golden --regenerate 99-rowsum  the golden writer (into BUILD_DIR/template-stage/golden)
  ladder run 99-rowsum RUNG             each reference rung, float32 and float64, through the contract
  ladder check 99-rowsum                the rung's output passes; a wrong one (one row x (1 + 1e-3)) fails
  python: ladder.stages / describe / golden / run / check on the same stage (no Python file edited)

The compile commands of every shared unit are the main build's, so with ccache (scripts/setup) only the
generated lists and the template's own files compile.
"""
import hashlib
import os
import shutil
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEMPLATE = os.path.join(ROOT, "examples", "stage-template")
STAGE = "99-rowsum"


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"FAILED ({r.returncode}): {' '.join(cmd)}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return r.stdout


def tree_digest():
    """sha256 of every file of the tree outside build folders: the test must leave them all as they were."""
    h = {}
    for d, dirs, names in os.walk(ROOT):
        dirs[:] = [x for x in dirs if not x.startswith((".", "build"))]
        for n in names:
            p = os.path.join(d, n)
            if os.path.isfile(p) and not os.path.islink(p):
                h[os.path.relpath(p, ROOT)] = hashlib.sha256(open(p, "rb").read()).hexdigest()
    return h


def cache_value(build, key):
    for line in open(os.path.join(build, "CMakeCache.txt")):
        if line.startswith(key + ":"):
            return line.split("=", 1)[1].strip()
    return None


def main():
    build = os.path.abspath(sys.argv[1])
    work = os.path.join(build, "template-stage")
    shutil.rmtree(work, ignore_errors=True)
    before = tree_digest()
    assert os.path.isfile(os.path.join(TEMPLATE, "ref", "src", STAGE, "stage.cpp"))

    # Configure from this tree as BUILD_DIR is configured, plus the template's folder; build the CLI and
    # the Python module only.
    tb = build + "-template"
    args = ["cmake", "-S", ROOT, "-B", tb, "-G", cache_value(build, "CMAKE_GENERATOR") or "Unix Makefiles",
            f"-DLADDER_STAGE_DIRS={os.path.relpath(TEMPLATE, ROOT)}", "-DLADDER_BENCH=OFF"]
    for key in ["CMAKE_BUILD_TYPE", "LADDER_CUDA", "LADDER_CCACHE", "LADDER_MARCH", "LADDER_WERROR",
                "CMAKE_CXX_COMPILER"]:
        v = cache_value(build, key)
        if v is not None:
            args.append(f"-D{key}={v}")
    run(args)
    python = os.path.isdir(os.path.join(build, "python", "CMakeFiles", "ladder_python.dir"))  # this build has it
    targets = ["ladder"] + (["ladder_python"] if python else [])
    run(["cmake", "--build", tb, "-j", "2", "--target"] + targets)
    cli = os.path.join(tb, "bin", "ladder")
    golden_root = os.path.join(work, "golden")

    # The CLI finds the stage from its folders.
    assert STAGE in run([cli, "list"]), "ladder list does not show the template stage"
    described = run([cli, "describe", STAGE])
    assert "the sum of each row" in described and "max_abs" in described, described
    out = run([cli, "golden", "--regenerate", STAGE, "--root", golden_root])
    cases = sorted(os.listdir(os.path.join(golden_root, STAGE)))
    assert cases == ["small", "wide"], (out, cases)
    case = os.path.join(golden_root, STAGE, "wide")
    for rung in ["sequential", "pairwise"]:
        for prec in ["float32", "float64"]:
            o = os.path.join(work, f"run-{rung}-{prec}")
            run([cli, "run", STAGE, rung, "--case", case, "--out", o, "--precision", prec])
            run([cli, "check", STAGE, case, os.path.join(o, "s.npy")])  # exit 0: pass
    # A wrong candidate fails (exit 1), so the check above is not vacuous.
    s = np.load(os.path.join(work, "run-pairwise-float32", "s.npy"))
    s[1] *= np.float32(1 + 1e-3)
    bad = os.path.join(work, "bad.npy")
    np.save(bad, s)
    r = subprocess.run([cli, "check", STAGE, case, bad], capture_output=True, text=True)
    assert r.returncode == 1, f"a wrong row sum passed: exit {r.returncode}\n{r.stdout}{r.stderr}"

    # Python: the same stage through the module, with no Python file edited.
    if "ladder_python" in targets:
        code = f"""
import numpy as np, ladder
assert "{STAGE}" in ladder.stages()
d = ladder.describe("{STAGE}")
assert [o["name"] for o in d["outputs"]] == ["s"], d
g = ladder.golden("{STAGE}", "small")
x = g["inputs"]["x"]
for rung in ["sequential", "pairwise"]:
    out = ladder.run("{STAGE}", rung, x=x)
    rep = ladder.check("{STAGE}", g, out["s"])
    assert rep["pass"], rep["text"]
bad = out["s"].copy(); bad[0] += np.float32(1e-3) * abs(bad[0]) + np.float32(1e-3)
assert not ladder.check("{STAGE}", r"{case}", ladder.run("{STAGE}", "pairwise", x=np.load(r"{case}/x.npy"))["s"] * 0)["pass"]
assert not ladder.check("{STAGE}", g, bad)["pass"]
print("python: ok")
"""
        env = dict(os.environ, PYTHONPATH=os.path.join(tb, "python"), PYTHONDONTWRITEBYTECODE="1")
        print(run(["/usr/bin/python3", "-c", code], env=env).strip())
    after = tree_digest()
    changed = sorted(f for f in set(before) | set(after) if before.get(f) != after.get(f))
    assert not changed, f"the template stage changed files of the tree: {changed}"
    print(f"template stage {STAGE}: list, describe, golden, run, check (pass and fail) and Python: ok; "
          "no file of the tree changed")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

"""scripts/lab_ci.py -- what `scripts/lab check | planted | ci` run (CI of the labs; the student's commands stay in
scripts/lab). Each function takes the scripts/lab module as `lab` (its make, load, build, compile_lab, ...), as
scripts/lab_notebook.py takes its pieces: scripts/lab is a script, not an importable module name.

    check    every lab's starter is up to date and FAILS its tests, the reference PASSES them (and the notebook on
             the lab build, for lab_notebook.CI_STAGES);
    planted  each planted mistake of tests/labs/<stage>.json fails naming its rung and output, with its own hint;
             each correct variant passes;
    pool     check and planted jobs of several stages at once, longest first, each in its own build folder."""
import filecmp
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from lab_report import parse_doctest, ranked_hints  # noqa: E402 (scripts/lab_report.py)


def check(lab, stages, solution_bdir=None, jobs=None):
    ok = True
    for stage in stages:
        with tempfile.TemporaryDirectory() as tmp:
            fresh = lab.make(stage, tmp)
            committed = os.path.join(lab.lab_dir(stage), "starter")
            for rel in lab.starter_files(lab.load(stage)):
                a, b = os.path.join(committed, rel), os.path.join(fresh, rel)
                if not os.path.exists(a) or not filecmp.cmp(a, b, shallow=False):
                    print(f"lab check {stage}: starter {rel} is out of date (run scripts/lab make {stage})")
                    ok = False
        starter = lab.build(stage, solution=False, jobs=jobs, verbose=False)
        if starter is None:
            print(f"lab check {stage}: the untouched starter does not compile")
            ok = False
        elif starter == 0:
            print(f"lab check {stage}: the untouched starter PASSES the tests (they cannot tell a TODO from a solution)")
            ok = False
        else:
            print(f"lab check {stage}: the untouched starter fails the lab tests, as it must")
        solution = lab.build(stage, solution=True, jobs=jobs, verbose=False, bdir=solution_bdir)
        if solution != 0:
            print(f"lab check {stage}: the reference solution does not pass the lab tests")
            ok = False
        else:
            print(f"lab check {stage}: the reference solution passes the lab tests")
        import lab_notebook  # scripts/lab_notebook.py: the notebook on the student's code
        if stage in lab_notebook.CI_STAGES:
            ok = lab_notebook.ci_check(stage, jobs or str(os.cpu_count() or 2), lab.load(stage), lab.lab_dir,
                                       lab.compile_lab) and ok
    return ok


def load_planted(lab, stage):
    """The planted mistakes of a lab: tests/labs/<stage>.json, outside the lab folder a student reads
    (its regexes quote the reference's lines)."""
    path = os.path.join(lab.ROOT, "tests", "labs", stage + ".json")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return json.load(f)["planted"]


def planted(lab, stages, jobs=None):
    """Each tests/labs/<stage>.json "planted" entry edits one reference file (the solution) in a copy -- "regex":
    [pattern, replacement], matching exactly once: a mistake ("expect": the rung, output, case its
    failures must name) must fail with such a message and get its own hint first ("hint": the id of a
    lab.json hint; without one, no hint may be shown), any second hint one of "hint_also"; a correct
    variant (no "expect") must pass. Each run's log is kept as build-lab-<stage>-planted/planted-<i>.log."""
    ok = True
    for stage in stages:
        spec = lab.load(stage)
        for i, p in enumerate(load_planted(lab, stage)):
            # the solution with one edit, as a lab starter folder; a fixed path, so that the build folder
            # only recompiles what the edited file feeds
            src = "build-lab-" + stage + "-planted-src"
            shutil.rmtree(os.path.join(lab.ROOT, src), ignore_errors=True)
            for rel in lab.starter_files(spec):
                os.makedirs(os.path.dirname(os.path.join(lab.ROOT, src, rel)), exist_ok=True)
                shutil.copy(os.path.join(lab.ROOT, rel), os.path.join(lab.ROOT, src, rel))
            path = os.path.join(lab.ROOT, src, p["file"])
            text = open(path).read()
            pattern, repl = p["regex"]
            edited, n = re.subn(pattern, repl, text)
            if n != 1:
                print(f"lab planted {stage} '{p['name']}': the pattern matches {n} times in {p['file']} (must be once)")
                ok = False
                continue
            open(path, "w").write(edited)
            bdir = "build-lab-" + stage + "-planted"
            print(f"== lab planted {stage}: {p['name']}", flush=True)
            rc = lab.build(stage, False, jobs, verbose=True, starter=src, bdir=bdir)
            if rc is not None:  # kept per mistake: the hints can be tuned on the logs without a rebuild
                shutil.copy(os.path.join(lab.ROOT, bdir, "last-run.log"), os.path.join(lab.ROOT, bdir, f"planted-{i}.log"))
            expect = p.get("expect")
            if expect is None:  # a correct variant
                good = rc == 0
                what = "passes, as a correct solution must" if good else "FAILS although it is correct"
            else:
                log = open(os.path.join(lab.ROOT, bdir, "last-run.log")).read() if rc is not None else ""
                fs = []
                for block in log.split("==== ")[1:]:
                    fs += parse_doctest(block, "")[0]
                named = [f for f in fs if all(getattr(f, k) == v for k, v in expect.items())]
                good = rc == 1 and bool(named)
                what = (f"fails, naming {expect} ({len(named)} of {len(fs)} failing checks)" if good
                        else f"is NOT caught with a message naming {expect} (exit {rc}, {len(fs)} failures)")
                # its own hint first; a second one only where the entry allows it ("hint_also")
                shown = [h.get("id", "?") for h in ranked_hints(fs, spec.get("hints", []))]
                own, allowed = p.get("hint"), [p.get("hint")] + p.get("hint_also", [])
                false = [h for h in shown if h not in allowed]
                if own and (not shown or shown[0] != own):
                    good = False
                    what += f"; its hint '{own}' is NOT shown first (shown: {shown or 'none'})"
                elif false:
                    good = False
                    what += f"; a FALSE hint is shown: {false}"
                elif own:
                    what += f", with its hint '{own}'" + (f" (and {shown[1:]})" if shown[1:] else "")
                elif not shown:
                    what += ", no hint"
            print(f"lab planted {stage}: '{p['name']}' {what}")
            ok = ok and good
    return ok


# What a lab's jobs cost, relative (measured: planted 01-softmax ~10 runs of ~25 s; a check ~30-60 s):
# the pool starts the longest first, so the two cores do not end on one long job.
def job_weight(lab, kind, stage):
    import lab_notebook  # a check that also runs the notebook twice (about a minute more)
    if kind != "planted":
        return 10 + (20 if stage in lab_notebook.CI_STAGES else 0)
    return len(load_planted(lab, stage)) * 3 + (40 if stage == "01-softmax" else 0)


def pool(lab, kinds, stages, parallel, jobs):
    """Runs `scripts/lab KIND STAGE` for every kind and stage, `parallel` at a time (each a process with
    its own build folder: build-lab-STAGE for check, build-lab-STAGE-planted for planted). The solution
    runs of `check` share build/: it is brought up to date once here, before any job starts, and the jobs
    are told not to build it (two makes in one build folder at once can race on its dependency files)."""
    import concurrent.futures
    todo = sorted(((k, s) for k in kinds for s in stages), key=lambda ks: -job_weight(lab, *ks))
    if "check" in kinds:
        targets = sorted({t for s in stages for t in lab.load(s)["tests"]})
        rc, out = lab.quiet(["cmake", "--preset", "ci"]) if not os.path.exists(os.path.join(lab.ROOT, "build", "CMakeCache.txt")) \
            else (0, "")
        if rc != 0 or lab.quiet(["cmake", "--build", "build", "-j", jobs or str(os.cpu_count() or 2), "--target"] + targets)[0] != 0:
            print(out[-3000:])
            print("lab: building the reference's lab tests in build/ failed")
            return False
    env = dict(os.environ, LADDER_LAB_SOLUTION_BUILT="1")
    jobs_arg = ["-j", jobs] if jobs else []  # each job's builds use every core (mostly links and cache hits)

    def run(ks):
        t0 = time.time()
        p = subprocess.run([sys.executable, os.path.abspath(lab.__file__), ks[0], ks[1], *jobs_arg], cwd=lab.ROOT, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        return p.returncode, p.stdout, time.time() - t0

    ok = True
    with concurrent.futures.ThreadPoolExecutor(max_workers=parallel) as ex:
        futures = {ex.submit(run, ks): ks for ks in todo}
        for f in concurrent.futures.as_completed(futures):
            (kind, stage), (rc, out, dt) = futures[f], f.result()
            print(f"==== lab {kind} {stage}: {'ok' if rc == 0 else 'FAILED'} [{dt:.0f} s]\n{out}", end="", flush=True)
            ok = ok and rc == 0
    return ok

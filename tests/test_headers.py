#!/usr/bin/env python3
"""Every public header compiles on its own: one translation unit per header, `#include "<header>"` and
nothing else, compiled with -fsyntax-only (a header that is the tail of another, or that leans on an
include its includer happened to make, fails here).

    test_headers.py --cxx g++ [--jobs N] [--flag=-I...]... ROOT DIR...   # every *.hpp under ROOT/DIR
    test_headers.py ... --launcher L --workdir W ROOT DIR...              # the same through a compiler launcher

With --workdir each translation unit is a file of W (a fixed path, the build folder's headers/) compiled with
-c in W, so a launcher such as ccache (cmake/ccache-launcher) can keep the verdicts: a header and its
includes unchanged since the last run -- in this clone or another one at the same depth -- cost no compile.
-fsyntax-only cannot be cached; -c at -O0 costs about the same (nothing is instantiated or emitted that
-fsyntax-only would not have parsed).
    test_headers.py --selftest --cxx g++                                 # a planted broken header fails

Prints one line per header that does not compile (with the compiler's first error) and exits 1, or
prints how many compiled and exits 0.
"""
import argparse
import concurrent.futures
import os
import subprocess
import sys
import tempfile


def headers_under(root, dirs):
    found = []
    for d in dirs:
        base = os.path.join(root, d)
        for dirpath, _, files in os.walk(base):
            for f in sorted(files):
                if f.endswith((".hpp", ".cuh", ".h")):
                    full = os.path.join(dirpath, f)
                    found.append((os.path.relpath(full, base), full))
    return sorted(found)


def compile_one(cxx, flags, include_as, tmp, launcher=None, cached=False):
    src = os.path.join(tmp, include_as.replace("/", "__") + ".cpp")
    with open(src, "w") as f:
        f.write('#include "%s"\n' % include_as)
    if cached:  # an object file a launcher can cache, compiled in the work folder (see the top)
        cmd = ([launcher] if launcher else []) + [cxx, "-std=c++20", "-O0", "-x", "c++", "-c", os.path.basename(src),
                                                  "-o", os.path.basename(src) + ".o"] + flags
    else:
        cmd = [cxx, "-std=c++20", "-fsyntax-only", "-x", "c++", src] + flags
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp)
    if r.returncode == 0:
        return None
    first = next((l for l in r.stderr.splitlines() if "error" in l), r.stderr.strip()[:300])
    return "%s: does not compile on its own: %s" % (include_as, first)


def run(cxx, flags, root, dirs, jobs, launcher=None, workdir=None):
    hdrs = headers_under(root, dirs)
    if not hdrs:
        print("test_headers: no headers found under %s" % ", ".join(dirs))
        return 1

    def all_of(tmp, cached):
        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as ex:
            return list(ex.map(lambda h: compile_one(cxx, flags, h[0], tmp, launcher, cached), hdrs))
    if workdir:
        os.makedirs(workdir, exist_ok=True)
        results = all_of(workdir, True)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            results = all_of(tmp, False)
    bad = [r for r in results if r]
    for b in bad:
        print(b)
    print("test_headers: %d of %d headers compile on their own" % (len(hdrs) - len(bad), len(hdrs)))
    return 1 if bad else 0


def selftest(cxx):
    # A header that uses std::vector without including <vector>, and one that is fine.
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "inc", "x"))
        with open(os.path.join(root, "inc", "x", "tail.hpp"), "w") as f:
            f.write("#pragma once\ninline std::vector<int> v() { return {}; }\n")
        with open(os.path.join(root, "inc", "x", "whole.hpp"), "w") as f:
            f.write("#pragma once\n#include <vector>\ninline std::vector<int> w() { return {}; }\n")
        flags = ["-I" + os.path.join(root, "inc")]
        for cached in (False, True):  # -fsyntax-only, and -c as under --workdir
            with tempfile.TemporaryDirectory() as tmp:
                bad = compile_one(cxx, flags, "x/tail.hpp", tmp, None, cached)
                good = compile_one(cxx, flags, "x/whole.hpp", tmp, None, cached)
            if bad is None or good is not None:
                print("test_headers selftest: FAILED (%s: planted tail header %s, whole header %s)" %
                      ("-c" if cached else "-fsyntax-only", "passed" if bad is None else "failed",
                       "passed" if good is None else "failed: " + good))
                return 1
    print("test_headers selftest: the planted header that is not self-contained is caught (-fsyntax-only and -c)")
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cxx", required=True)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--flag", action="append", default=[])
    ap.add_argument("--selftest", action="store_true")
    ap.add_argument("--launcher")
    ap.add_argument("--workdir")
    ap.add_argument("root", nargs="?")
    ap.add_argument("dirs", nargs="*")
    a = ap.parse_args()
    if a.selftest:
        return selftest(a.cxx)
    return run(a.cxx, a.flag, a.root, a.dirs, a.jobs, a.launcher, a.workdir)


if __name__ == "__main__":
    sys.exit(main())

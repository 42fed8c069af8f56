#!/usr/bin/env python3
"""Every public header compiles on its own: one translation unit per header, `#include "<header>"` and
nothing else, compiled with -fsyntax-only (a header that is the tail of another, or that leans on an
include its includer happened to make, fails here).

    test_headers.py --cxx g++ [--jobs N] [--flag=-I...]... ROOT DIR...   # every *.hpp under ROOT/DIR
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


def compile_one(cxx, flags, include_as, tmp):
    src = os.path.join(tmp, include_as.replace("/", "__") + ".cpp")
    with open(src, "w") as f:
        f.write('#include "%s"\n' % include_as)
    cmd = [cxx, "-std=c++20", "-fsyntax-only", "-x", "c++", src] + flags
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode == 0:
        return None
    first = next((l for l in r.stderr.splitlines() if "error" in l), r.stderr.strip()[:300])
    return "%s: does not compile on its own: %s" % (include_as, first)


def run(cxx, flags, root, dirs, jobs):
    hdrs = headers_under(root, dirs)
    if not hdrs:
        print("test_headers: no headers found under %s" % ", ".join(dirs))
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as ex:
            results = list(ex.map(lambda h: compile_one(cxx, flags, h[0], tmp), hdrs))
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
        with tempfile.TemporaryDirectory() as tmp:
            bad = compile_one(cxx, flags, "x/tail.hpp", tmp)
            good = compile_one(cxx, flags, "x/whole.hpp", tmp)
    if bad is None or good is not None:
        print("test_headers selftest: FAILED (planted tail header %s, whole header %s)" %
              ("passed" if bad is None else "failed", "passed" if good is None else "failed: " + good))
        return 1
    print("test_headers selftest: the planted header that is not self-contained is caught")
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cxx", required=True)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--flag", action="append", default=[])
    ap.add_argument("--selftest", action="store_true")
    ap.add_argument("root", nargs="?")
    ap.add_argument("dirs", nargs="*")
    a = ap.parse_args()
    if a.selftest:
        return selftest(a.cxx)
    return run(a.cxx, a.flag, a.root, a.dirs, a.jobs)


if __name__ == "__main__":
    sys.exit(main())

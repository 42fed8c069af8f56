#!/usr/bin/python3
"""Self-test of scripts/run-notebook: a good notebook passes; a compile error, a failing check and an
invalid file each make it fail (exit 1, 1, 2) naming the cell. Small notebooks, no ladder library."""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNNER = os.path.join(ROOT, "scripts", "run-notebook")


def notebook(cells, nbformat=4, kernel="xcpp17"):
    return {"nbformat": nbformat, "nbformat_minor": 5,
            "metadata": {"kernelspec": {"name": kernel, "display_name": "C++17", "language": "C++17"}},
            "cells": [{"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
                       "source": c} for c in cells]}


GOOD = ['#pragma cling add_include_path("../ref/include")\n#include <stdexcept>\n#include <cstdio>',
        'int answer = 6 * 7;\nprintf("answer %d\\n", answer);',
        'if (answer != 42) throw std::runtime_error("check failed");']
CASES = [
    ("good", notebook(GOOD), 0, "3 code cells ran without error"),
    ("compile error", notebook(GOOD[:2] + ["int y = undeclared_name;"] + GOOD[2:]), 1, "cell 3: compile error"),
    ("failing check", notebook(GOOD[:2] + ['if (answer != 41) throw std::runtime_error("planted");']), 1,
     "cell 3: runtime failure"),
    ("nbformat 3", notebook(GOOD, nbformat=3), 2, "nbformat must be 4"),
    ("wrong kernel", notebook(GOOD, kernel="python3"), 2, "expected 'xcpp17'"),
]


def main():
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, "notebooks"))
        for name, nb, want_rc, want_text in CASES:
            path = os.path.join(tmp, "notebooks", name.replace(" ", "_") + ".ipynb")
            with open(path, "w") as f:
                json.dump(nb, f)
            p = subprocess.run([RUNNER, path], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            ok = p.returncode == want_rc and want_text in p.stdout
            print(f"{'ok  ' if ok else 'FAIL'} {name}: exit {p.returncode} (want {want_rc})")
            if not ok:
                print(p.stdout)
                failures += 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""Self-test of scripts/run-notebook: a good notebook passes; a compile error, a failing check and an
invalid file each make it fail (exit 1, 1, 2) naming the cell; a missing clang-repl is one line naming
Debian's package (exit 2); --write stores the cells' outputs; LADDER_INCLUDE_FIRST puts a folder ahead of the
notebook's include paths. Small notebooks, no ladder library."""
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
INCLUDE = ['#pragma cling add_include_path("../ref/include")\n#include <stdexcept>\n#include "side.hpp"',
           'if (side != 7) throw std::runtime_error("the reference folder\'s side.hpp was included");']
CASES = [
    ("good", notebook(GOOD), 0, "3 code cells ran without error"),
    ("compile error", notebook(GOOD[:2] + ["int y = undeclared_name;"] + GOOD[2:]), 1, "cell 3: compile error"),
    ("failing check", notebook(GOOD[:2] + ['if (answer != 41) throw std::runtime_error("planted");']), 1,
     "cell 3: runtime failure"),
    ("nbformat 3", notebook(GOOD, nbformat=3), 2, "nbformat must be 4"),
    ("wrong kernel", notebook(GOOD, kernel="python3"), 2, "expected 'xcpp17'"),
    ("no clang-repl", notebook(GOOD), 2, "clang-tools-19"),
    ("write outputs", notebook(GOOD), 0, "outputs of 3 code cells stored"),
    # LADDER_INCLUDE_FIRST (scripts/lab notebook): a folder ahead of the notebook's own include paths. Both
    # folders hold side.hpp; the notebook passes only with the first folder's (side = 7), and fails without it.
    ("include first", notebook(INCLUDE), 0, "2 code cells ran without error"),
    ("include first unset", notebook(INCLUDE), 1, "cell 2: runtime failure"),
]


def main():
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, "notebooks"))
        for name, nb, want_rc, want_text in CASES:
            path = os.path.join(tmp, "notebooks", name.replace(" ", "_") + ".ipynb")
            with open(path, "w") as f:
                json.dump(nb, f)
            env = dict(os.environ, CLANG_REPL="clang-repl-not-installed") if name == "no clang-repl" else None
            if name.startswith("include first"):
                for folder, value in (("first", 7), (os.path.join("ref", "include"), 6)):
                    os.makedirs(os.path.join(tmp, folder), exist_ok=True)
                    with open(os.path.join(tmp, folder, "side.hpp"), "w") as f:
                        f.write(f"#pragma once\nint side = {value};\n")
                env = dict(os.environ)
                env.pop("LADDER_INCLUDE_FIRST", None)
                if name == "include first":
                    env["LADDER_INCLUDE_FIRST"] = os.path.join(tmp, "first")
            args = [RUNNER, "--write", path] if name == "write outputs" else [RUNNER, path]
            p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
            ok = p.returncode == want_rc and want_text in p.stdout
            if name == "no clang-repl":  # one line, no traceback
                ok = ok and len(p.stdout.strip().splitlines()) == 1 and "Traceback" not in p.stdout
            if name == "write outputs":  # cell 2's printf is stored as its output
                with open(path) as f:
                    cells = json.load(f)["cells"]
                ok = ok and cells[1]["outputs"][0]["text"] == ["answer 42\n"] and cells[1]["execution_count"] == 2
            print(f"{'ok  ' if ok else 'FAIL'} {name}: exit {p.returncode} (want {want_rc})")
            if not ok:
                print(p.stdout)
                failures += 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

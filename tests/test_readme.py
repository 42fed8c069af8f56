"""tests/test_readme.py [--selftest] -- the README stays what issue 37 asked of it: at most 250 lines (what ladder
is, the two commands, the ladder, the course path, oracle use, where things are; dated measurements live in
bench/reports/ and the chapters), and a Layout section that names every top-level folder of the repository (a
folder nobody can find is a folder nobody maintains). --selftest plants both faults in scratch copies (a README one
line too long; a top-level folder the Layout does not name) and requires each to be reported."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_LINES = 250
# Top-level folders that are not part of the repository's layout: build trees, caches, reports made by commands.
IGNORED = re.compile(r"^(\..*|build.*|bench-report.*|reproduce|__pycache__|Testing)$")


def top_folders(root):
    """The repository's top-level folders: git's tracked ones where root is a checkout (a user's `case/` or a build
    tree is not part of the layout), else every folder not IGNORED."""
    try:
        out = subprocess.run(["git", "-C", root, "ls-files"], capture_output=True, text=True, check=True).stdout
        tracked = {p.split("/", 1)[0] for p in out.splitlines() if "/" in p}
        if tracked and os.path.realpath(root) == os.path.realpath(
                subprocess.run(["git", "-C", root, "rev-parse", "--show-toplevel"], capture_output=True, text=True,
                               check=True).stdout.strip()):
            return sorted(d for d in tracked if not IGNORED.match(d))
    except (OSError, subprocess.CalledProcessError):
        pass
    return sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)) and not IGNORED.match(d))


def problems(root, folders=None):
    found = []
    with open(os.path.join(root, "README.md"), encoding="utf-8") as f:
        text = f.read()
    n = len(text.splitlines())
    if n > MAX_LINES:
        found.append(f"README.md: {n} lines violates at most {MAX_LINES} (move dated measurements to bench/reports/ "
                     "or the chapters)")
    m = re.search(r"^## Layout\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    if not m:
        return found + ["README.md: no '## Layout' section"]
    layout = m.group(1)
    if folders is None:
        folders = top_folders(root)
    for d in folders:
        if not re.search(r"(^|[\s,(])" + re.escape(d) + r"/", layout, re.M):
            found.append(f"README.md: the Layout section does not name the top-level folder {d}/")
    return found


def main():
    if "--selftest" in sys.argv:
        with tempfile.TemporaryDirectory() as tmp:
            shutil.copy(os.path.join(ROOT, "README.md"), tmp)
            for d in ("ref", "cuda", "tests"):
                os.mkdir(os.path.join(tmp, d))
            if problems(tmp):
                print(f"selftest: the unplanted copy already has problems: {problems(tmp)}")
                return 1
            os.mkdir(os.path.join(tmp, "newstage"))
            got = problems(tmp)
            if len(got) != 1 or "newstage/" not in got[0]:
                print(f"selftest: the unnamed folder newstage/ was not reported exactly once: {got}")
                return 1
            os.rmdir(os.path.join(tmp, "newstage"))
            with open(os.path.join(tmp, "README.md"), encoding="utf-8") as f:
                lines = f.read().splitlines()
            with open(os.path.join(tmp, "README.md"), "w", encoding="utf-8") as f:
                f.write("\n".join(["x"] * (MAX_LINES + 1 - len(lines)) + lines) + "\n")
            got = problems(tmp)
            if len(got) != 1 or "violates at most" not in got[0]:
                print(f"selftest: a README of {MAX_LINES + 1} lines was not reported exactly once: {got}")
                return 1
        print(f"selftest: a {MAX_LINES + 1}-line README and a top-level folder missing from the Layout are reported")
        return 0
    bad = problems(ROOT)
    for p in bad:
        print(p)
    if not bad:
        print(f"README.md: at most {MAX_LINES} lines, and its Layout names every top-level folder")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

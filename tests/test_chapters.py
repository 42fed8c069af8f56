#!/usr/bin/python3
"""The course chapters stand alone (tests/chapters.cmake).

For every chapters/NN-stage/README.md and its lab/README.md:
  * no internal reference a reader cannot follow: the words "seed", "issue", "facts file" and the
    name of the maintainers' design file (RNG seeds are called random streams in the prose);
  * every relative link and image points at a file that exists in the repository;
  * the chapter shows at least one figure, and every figure is a committed file.
Run with a chapter folder as the only argument to check one chapter; --selftest plants each fault
in a scratch copy and requires it to be reported.
"""
import os
import re
import shutil
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BANNED = re.compile(r"\b(seeds?|issues?|facts file|DESIGN\.md)\b", re.IGNORECASE)
LINK = re.compile(r"(!?)\[[^\]]*\]\(([^)\s]+)\)")


def check_file(path, root, need_figure):
    problems = []
    rel = os.path.relpath(path, root)
    text = open(path, encoding="utf-8").read()
    in_code = False
    figures = 0
    for n, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            in_code = not in_code
        for m in BANNED.finditer(line):
            problems.append(f"{rel}:{n}: internal reference '{m.group(1)}': {line.strip()[:100]}")
        if in_code:
            continue
        for m in LINK.finditer(line):
            image, target = m.group(1) == "!", m.group(2)
            if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                continue
            file_part = target.split("#", 1)[0]
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part))
            if not os.path.exists(dest):
                problems.append(f"{rel}:{n}: link target '{target}' does not exist")
            elif image:
                figures += 1
    if need_figure and figures == 0:
        problems.append(f"{rel}: the chapter shows no figure (![...](figures/...))")
    return problems


def check_tree(root):
    problems = []
    chapters = sorted(d for d in os.listdir(os.path.join(root, "chapters")) if re.match(r"^\d\d-", d))
    if not chapters:
        problems.append("no chapters found")
    for ch in chapters:
        base = os.path.join(root, "chapters", ch)
        readme = os.path.join(base, "README.md")
        if not os.path.exists(readme):
            problems.append(f"chapters/{ch}: no README.md")
            continue
        problems += check_file(readme, root, need_figure=True)
        lab = os.path.join(base, "lab", "README.md")
        if os.path.exists(lab):
            problems += check_file(lab, root, need_figure=False)
    return problems


def selftest():
    """Each planted fault must be reported; the committed tree must be clean."""
    plants = [
        ("a banned word", lambda t: t + "\nRun it with seed 7.\n", "internal reference 'seed'"),
        ("the design file", lambda t: t + "\nSee DESIGN.md.\n", "internal reference 'DESIGN.md'"),
        ("a broken link", lambda t: t + "\n[x](no-such-file.md)\n", "does not exist"),
        ("no figure", lambda t: re.sub(r"!\[", "[", t), "shows no figure"),
    ]
    failed = 0
    for name, plant, expect in plants:
        with tempfile.TemporaryDirectory() as tmp:
            shutil.copytree(os.path.join(ROOT, "chapters"), os.path.join(tmp, "chapters"),
                            ignore=shutil.ignore_patterns("starter"))
            # links may point outside chapters/: mirror the rest of the tree as links
            for entry in os.listdir(ROOT):
                if entry != "chapters" and not entry.startswith("build"):
                    os.symlink(os.path.join(ROOT, entry), os.path.join(tmp, entry))
            target = os.path.join(tmp, "chapters", "01-softmax", "README.md")
            text = open(target, encoding="utf-8").read()
            open(target, "w", encoding="utf-8").write(plant(text))
            found = check_tree(tmp)
            ok = any(expect in p for p in found)
            print(f"selftest: {name}: {'reported' if ok else 'NOT REPORTED'}")
            failed += not ok
    return failed


def main():
    if sys.argv[1:] == ["--selftest"]:
        sys.exit(1 if selftest() else 0)
    problems = check_tree(ROOT)
    for p in problems:
        print(p)
    print(f"chapters: {len(problems)} problem(s)")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
